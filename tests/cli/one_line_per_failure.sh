#!/usr/bin/env bash
# Several ranks failing alike end the job with one error line: a checkpoint
# that every rank learns cannot be published (its target step-N.h5 is a
# directory), on 2 ranks and on 4 (d = 2). The failed write leaves no
# temporary file behind and the previous checkpoint in place.
# Usage: one_line_per_failure.sh MPIEXEC KPIPE (from the repository root)
set -uo pipefail
# shellcheck source=tests/support/bounded.sh
source "$(dirname "$0")/../support/bounded.sh"
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
one_line() {  # WHAT EXPECTED_PATTERN: exactly one error line, matching
  local lines
  lines=$(grep -c "kpipe: error" "$work/err")
  [ "$lines" -eq 1 ] || fail "$1: $lines error lines: $(grep "kpipe: error" "$work/err")"
  grep "kpipe: error" "$work/err" | grep -q "$2" || fail "$1: the line does not say '$2': $(cat "$work/err")"
}

for layout in "2" "4 pipeline.data_parallel=2"; do
  read -r ranks overrides <<<"$layout"
  dir="$work/checkpoints-$ranks"
  mkdir -p "$dir/step-4.h5"  # the second checkpoint's name is taken by a directory
  # shellcheck disable=SC2086 # overrides: words
  bounded 120 "$mpiexec" --oversubscribe -n "$ranks" "$kpipe" run inputs/quickstart.toml train.steps=5 \
    checkpoint.every=2 checkpoint.path="$dir" $overrides >/dev/null 2>"$work/err"
  code=$?
  [ "$code" -eq 1 ] || fail "checkpoint over a directory on $ranks ranks: exit code $code: $(cat "$work/err")"
  one_line "checkpoint over a directory on $ranks ranks" "cannot rename .*step-4.h5: Is a directory"
  [ -f "$dir/step-2.h5" ] || fail "$ranks ranks: the previous checkpoint step-2.h5 is gone: $(ls "$dir")"
  leftovers=$(find "$dir" -name 'step-*.h5.tmp-*' | wc -l)
  [ "$leftovers" -eq 0 ] || fail "$ranks ranks: the failed write left $leftovers temporary file(s): $(ls "$dir")"
done

echo "checked: a checkpoint over a directory on 2 and 4 ranks"
echo "$failures failures"
[ "$failures" -eq 0 ]
