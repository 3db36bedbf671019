#!/usr/bin/env bash
# checkpoint.restart = "latest" skips a torn newest checkpoint and another
# program's step-<N>.h5, each with a warning that names the file, and
# restarts from the newest good one; over many such files it names the first
# three of each kind and counts the rest.
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

many="$work/many"
mkdir "$many"
cp "$work/step-2.h5" "$many/step-2.h5"
for step in $(seq 10 509); do : >"$many/step-$step.h5"; done                       # 500 empty files
for step in $(seq 600 604); do head -c 1000 "$work/step-2.h5" >"$many/step-$step.h5"; done  # 5 torn ones
"$kpipe" run "$deck" checkpoint.path="$many" checkpoint.restart=latest train.steps=3 >"$work/out" 2>&1 ||
  fail "restart over 505 bad files: $(tail -3 "$work/out")"
grep -q "weights: $many/step-2.h5 after 2 steps" "$work/out" || fail "did not restart from step-2.h5 among 505 bad files"
named=$(grep -c "skipping $many/step-" "$work/out")
[ "$named" -eq 6 ] || fail "$named files named in warnings, not 3 torn and 3 empty: $(grep warning "$work/out")"
grep -q "skipping 497 more step-<N>.h5 files that are not HDF5 files" "$work/out" || fail "the 497 other empty files are not counted"
grep -q "skipped 2 more step-<N>.h5 files that do not read as kpipe's" "$work/out" || fail "the 2 other torn files are not counted"
grep "warning" "$work/out" | grep -v "skipping $many/step-"
echo "$failures failures"
[ "$failures" -eq 0 ]
