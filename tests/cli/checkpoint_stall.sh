#!/usr/bin/env bash
# A rank that stops half-way through a checkpoint write (SIGSTOP, as a hung
# node would; KPIPE_FAULT=RANK:checkpoint-stall, test-only) leaves its peers
# inside collective HDF5/MPI-IO calls the watchdog cannot poll: the write's
# deadline ends the job within runtime.watchdog_seconds + 5 s with the
# watchdog's line, the previous checkpoint stays intact, and nothing is left
# in /dev/shm.
# Usage: checkpoint_stall.sh MPIEXEC KPIPE RANK (2 ranks, from the repository root)
set -uo pipefail
mpiexec=$1 kpipe=$2 rank=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=inputs/quickstart.toml
fail() { echo "FAIL: $*"; exit 1; }
shm_before=$(find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | wc -l)

"$mpiexec" -n 2 "$kpipe" run $deck train.steps=2 checkpoint.every=2 checkpoint.path="$work" >/dev/null ||
  fail "the first run failed"
cp "$work/step-2.h5" "$work/before.h5"

watchdog=3
start=$(date +%s)
KPIPE_FAULT="$rank:checkpoint-stall" timeout 60 "$mpiexec" -n 2 "$kpipe" run $deck train.steps=4 checkpoint.every=2 \
  checkpoint.path="$work" checkpoint.restart="$work/step-2.h5" runtime.watchdog_seconds=$watchdog \
  >/dev/null 2>"$work/err"
code=$?
seconds=$(($(date +%s) - start))
if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then fail "the stalled run exited with $code after $seconds s"; fi
[ "$seconds" -le $((watchdog + 5 + 2)) ] || fail "the job took $seconds s to end (watchdog $watchdog s)"
grep -q "kpipe: error: watchdog: rank $((1 - rank)) waited more than $watchdog s (runtime.watchdog_seconds) in a checkpoint write" \
  "$work/err" || fail "no watchdog line from the waiting rank: $(cat "$work/err")"
[ -f "$work/step-4.h5" ] && fail "an incomplete step-4.h5 was published"
cmp -s "$work/step-2.h5" "$work/before.h5" || fail "step-2.h5 changed"
shm_after=$(find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | wc -l)
[ "$shm_after" -le "$shm_before" ] || fail "$((shm_after - shm_before)) file(s) left in /dev/shm"
echo "rank $rank stalled in a checkpoint write; the job ended after $seconds s (exit $code); step-2.h5 intact"
