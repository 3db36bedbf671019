#!/usr/bin/env bash
# A rank that stops (SIGSTOP, as a hung node would: KPIPE_FAULT=RANK:grid-stall,
# test-only) just before the world is split into the grid's groups leaves its
# peer inside MPI_Comm_split, which has no nonblocking form: the collective
# watchdog's deadline ends the job within runtime.watchdog_seconds + 5 s, with
# the peer's one line naming what it waited in.
# Usage: grid_stall.sh MPIEXEC KPIPE RANK (2 ranks, from the repository root)
set -uo pipefail
mpiexec=$1 kpipe=$2 rank=$3
err=$(mktemp)
trap 'rm -f "$err"' EXIT
watchdog=3
start=$(date +%s)
KPIPE_FAULT="$rank:grid-stall" timeout 60 "$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml \
  "runtime.watchdog_seconds=$watchdog" >/dev/null 2>"$err"
code=$?
seconds=$(($(date +%s) - start))
if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then echo "the run exited with $code after $seconds s"; exit 1; fi
[ "$seconds" -le $((watchdog + 5 + 2)) ] || { echo "the job took $seconds s to end (watchdog $watchdog s)"; exit 1; }
grep "kpipe: error: watchdog: rank $((1 - rank)) waited more than $watchdog s" "$err" | grep -q "splitting the world" ||
  { echo "no watchdog line from the waiting rank: $(cat "$err")"; exit 1; }
echo "a rank stopped before the grid's split: the job ended after $seconds s with the peer's watchdog line"
