#!/usr/bin/env bash
# A rank that fails half-way through a checkpoint write (MODE fault:
# KPIPE_FAULT=RANK:checkpoint, test-only) ends the job with its line; one
# that stops there (MODE stall: KPIPE_FAULT=RANK:checkpoint-stall, SIGSTOP as
# a hung node would) leaves its peer inside collective HDF5/MPI-IO calls the
# watchdog cannot poll, and the write's deadline ends the job within
# runtime.watchdog_seconds + 5 s with the peer's watchdog line, leaving nothing
# in /dev/shm; one that stops as it starts to load the checkpoint it restarts
# from (MODE restart-stall) leaves its peer in the gather of the model's
# tensor names, watched the same way. Either way the previous checkpoint stays
# in place, complete and verified: a restart from it still runs, and no
# step-4.h5 appears.
# Usage: checkpoint_fault.sh MPIEXEC KPIPE RANK MODE (2 ranks, from the repository root)
set -uo pipefail
# shellcheck source=tests/support/bounded.sh
source "$(dirname "$0")/../support/bounded.sh"
mpiexec=$1 kpipe=$2 rank=$3 mode=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=inputs/quickstart.toml
fail() { echo "FAIL: $*"; exit 1; }
shm_before=$(find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | wc -l)

"$mpiexec" -n 2 "$kpipe" run $deck train.steps=2 checkpoint.every=2 checkpoint.path="$work" >/dev/null ||
  fail "the first run failed"
[ -f "$work/step-2.h5" ] || fail "no step-2.h5"
cp "$work/step-2.h5" "$work/before.h5"

watchdog=3
case "$mode" in
  fault) fault="$rank:checkpoint" limit=() ;;
  stall) fault="$rank:checkpoint-stall" limit=("runtime.watchdog_seconds=$watchdog") waiting="a checkpoint write" ;;
  restart-stall)
    fault="$rank:restart-stall" limit=("runtime.watchdog_seconds=$watchdog") waiting="a checkpoint restart" ;;
  *) fail "MODE is fault, stall or restart-stall, not '$mode'" ;;
esac
start=$(date +%s)
KPIPE_FAULT="$fault" bounded 60 "$mpiexec" -n 2 "$kpipe" run $deck train.steps=4 checkpoint.every=2 \
  checkpoint.path="$work" checkpoint.restart="$work/step-2.h5" "${limit[@]}" >/dev/null 2>"$work/err"
code=$?
seconds=$(($(date +%s) - start))
if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then fail "the $mode run exited with $code after $seconds s: $(cat "$work/err")"; fi
if [ "$mode" = fault ]; then
  grep -q "kpipe: error: rank $rank: injected fault" "$work/err" || fail "no fault message: $(cat "$work/err")"
else
  [ "$seconds" -le $((watchdog + 5 + 2)) ] || fail "the job took $seconds s to end (watchdog $watchdog s)"
  grep -q "kpipe: error: watchdog: rank $((1 - rank)) waited more than $watchdog s (runtime.watchdog_seconds) in $waiting" \
    "$work/err" || fail "no watchdog line from the waiting rank: $(cat "$work/err")"
  shm_after=$(find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | wc -l)
  [ "$shm_after" -le "$shm_before" ] || fail "$((shm_after - shm_before)) file(s) left in /dev/shm"
fi
[ -f "$work/step-4.h5" ] && fail "an incomplete step-4.h5 was published"
cmp -s "$work/step-2.h5" "$work/before.h5" || fail "step-2.h5 changed"

"$mpiexec" -n 2 "$kpipe" infer $deck train.steps=1 checkpoint.restart="$work/step-2.h5" >"$work/out" 2>&1 ||
  fail "step-2.h5 no longer loads: $(cat "$work/out")"
grep -q "read and verified" "$work/out" || fail "step-2.h5 was not verified"
echo "rank $rank ($mode) half-way, the job ended after $seconds s (exit $code); step-2.h5 intact and verified;" \
  "$(find "$work" -mindepth 1 -maxdepth 1 -name '*tmp*' | wc -l) temporary file(s) left"
