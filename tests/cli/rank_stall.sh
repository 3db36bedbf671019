#!/usr/bin/env bash
# A rank that stops (SIGSTOP, as a hung node would: KPIPE_FAULT=RANK:PHASE,
# test-only) where its peer waits in a call with no nonblocking form:
# grid-stall just before the world is split into the grid's groups (the peer
# is inside MPI_Comm_split), finalize-stall as the job ends (the peer would be
# inside MPI_Finalize). The collective watchdog ends the job within
# runtime.watchdog_seconds + 5 s, with the peer's one line naming what it
# waited in (WAITED_IN).
# Usage: rank_stall.sh MPIEXEC KPIPE RANK PHASE WAITED_IN (2 ranks, from the repository root)
set -uo pipefail
# shellcheck source=tests/support/bounded.sh
source "$(dirname "$0")/../support/bounded.sh"
mpiexec=$1 kpipe=$2 rank=$3 phase=$4 waited_in=$5
err=$(mktemp)
trap 'rm -f "$err"' EXIT
watchdog=3
start=$(date +%s)
KPIPE_FAULT="$rank:$phase" bounded 60 "$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml \
  "runtime.watchdog_seconds=$watchdog" >/dev/null 2>"$err"
code=$?
seconds=$(($(date +%s) - start))
if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then echo "the run exited with $code after $seconds s: $(cat "$err")"; exit 1; fi
[ "$seconds" -le $((watchdog + 5 + 2)) ] || { echo "the job took $seconds s to end (watchdog $watchdog s)"; exit 1; }
grep "kpipe: error: watchdog: rank $((1 - rank)) waited more than $watchdog s" "$err" | grep -q "$waited_in" ||
  { echo "no watchdog line from the waiting rank: $(cat "$err")"; exit 1; }
echo "a rank stopped at $phase: the job ended after $seconds s with the peer's watchdog line"
