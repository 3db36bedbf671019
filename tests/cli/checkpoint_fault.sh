#!/usr/bin/env bash
# A checkpoint write that fails half-way on one rank (KPIPE_FAULT=RANK:checkpoint,
# test-only) ends the job and leaves the previous checkpoint in place, complete
# and verified: a restart from it still runs, and no step-4.h5 appears.
# Usage: checkpoint_fault.sh MPIEXEC KPIPE RANK (2 ranks, from the repository root)
set -uo pipefail
mpiexec=$1 kpipe=$2 rank=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=inputs/quickstart.toml
fail() { echo "FAIL: $*"; exit 1; }

"$mpiexec" -n 2 "$kpipe" run $deck train.steps=2 checkpoint.every=2 checkpoint.path="$work" >/dev/null ||
  fail "the first run failed"
[ -f "$work/step-2.h5" ] || fail "no step-2.h5"
cp "$work/step-2.h5" "$work/before.h5"

KPIPE_FAULT="$rank:checkpoint" timeout 60 "$mpiexec" -n 2 "$kpipe" run $deck train.steps=4 checkpoint.every=2 \
  checkpoint.path="$work" checkpoint.restart="$work/step-2.h5" >/dev/null 2>"$work/err"
code=$?
if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then fail "the faulty run exited with $code"; fi
grep -q "kpipe: error: rank $rank: injected fault" "$work/err" || fail "no fault message: $(cat "$work/err")"
[ -f "$work/step-4.h5" ] && fail "an incomplete step-4.h5 was published"
cmp -s "$work/step-2.h5" "$work/before.h5" || fail "step-2.h5 changed"

"$mpiexec" -n 2 "$kpipe" infer $deck train.steps=1 checkpoint.restart="$work/step-2.h5" >"$work/out" 2>&1 ||
  fail "step-2.h5 no longer loads: $(cat "$work/out")"
grep -q "read and verified" "$work/out" || fail "step-2.h5 was not verified"
echo "rank $rank failed half-way; step-2.h5 intact and verified; $(find "$work" -mindepth 1 -maxdepth 1 -name '*tmp*' | wc -l) temporary file(s) left"
