#!/usr/bin/env bash
# An invalid hand-written schedule with an error on each rank: kpipe prints
# the grid of its lowered actions with both offending actions marked on
# standard output, then its one error line (naming the first, counting the
# other) on standard error, with exit code 2.
#   schedule_grid.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$kpipe" plan tests/data/bad_decks/sched-two-errors.toml >"$work/out" 2>"$work/err"
code=$?
cat "$work/out" "$work/err"
[ "$code" -eq 2 ] || { echo "exit code $code, not 2"; exit 1; }
[ "$(wc -l <"$work/err")" -eq 1 ] || { echo "not one error line"; exit 1; }
grep -q "two-errors.txt:7: invalid schedule: rank 0, action 2 (F mb=0 chunk=0): appears twice (also action 0) (and 1 more, marked above)$" \
  "$work/err" || { echo "the error line does not name the first problem and count the second"; exit 1; }
grep -Eq '^ +2  >F0< +LOSS0$' "$work/out" || { echo "rank 0's duplicate forward is not marked"; exit 1; }
grep -Eq '^ +6   RECV_GRAD1 +>LOSS1<$' "$work/out" || { echo "rank 1's early loss is not marked"; exit 1; }
[ "$(grep -o '>[A-Z_]*[0-9]*<' "$work/out" | wc -l)" -eq 2 ] || { echo "not exactly two actions marked"; exit 1; }
echo "an invalid schedule: both problems marked in the grid, one error line"
