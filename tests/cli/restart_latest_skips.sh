#!/usr/bin/env bash
# checkpoint.restart = "latest" skips a torn newest checkpoint and another
# program's step-<N>.h5, each with a warning that names the file, and
# restarts from the newest good one.
# Usage: restart_latest_skips.sh KPIPE
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
deck=tests/data/checkpoints/tiny.toml
"$kpipe" run "$deck" checkpoint.every=1 checkpoint.path="$work" train.steps=2 >/dev/null 2>&1 || fail "the first run failed"
head -c 1000 "$work/step-2.h5" >"$work/step-3.h5"  # torn: a write cut short
echo "not a checkpoint" >"$work/step-4.h5"         # another program's
"$kpipe" run "$deck" checkpoint.path="$work" checkpoint.restart=latest train.steps=5 >"$work/out" 2>&1
code=$?
[ "$code" -eq 0 ] || fail "exit code $code: $(cat "$work/out")"
for step in 4 3; do
  grep -q "warning: checkpoint.restart = \"latest\": skipping $work/step-$step.h5" "$work/out" ||
    fail "no warning for step-$step.h5: $(cat "$work/out")"
done
grep -q "weights: $work/step-2.h5 after 2 steps" "$work/out" || fail "did not restart from step-2.h5: $(cat "$work/out")"
grep "warning\|weights:" "$work/out"
echo "$failures failures"
[ "$failures" -eq 0 ]
