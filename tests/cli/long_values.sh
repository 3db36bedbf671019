#!/usr/bin/env bash
# A 1 MB deck value, a 1 MB unknown key and a 60 KB command-line value are
# refused in one line of at most 1,000 bytes that states the value's length.
# Usage: long_values.sh KPIPE
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
long=$(head -c 1000000 /dev/zero | tr '\0' x)
printf 'model.kind = "%s"\n' "$long" >"$work/value.toml"
printf '%s = 1\n' "$long" >"$work/key.toml"
check() {  # CASE EXPECTED-LENGTH COMMAND...
  local case=$1 length=$2
  shift 2
  "$@" >/dev/null 2>"$work/err"
  local code=$? line
  line=$(grep "kpipe: error:" "$work/err")
  [ "$code" -eq 2 ] || { echo "FAIL: $case: exit code $code"; failures=$((failures + 1)); }
  [ "$(grep -c "kpipe: error:" "$work/err")" -eq 1 ] || { echo "FAIL: $case: not one error line"; failures=$((failures + 1)); }
  [ "${#line}" -le 1000 ] || { echo "FAIL: $case: a line of ${#line} characters"; failures=$((failures + 1)); }
  [[ "$line" == *"($length bytes)"* ]] || { echo "FAIL: $case: the length is not stated: $line"; failures=$((failures + 1)); }
  echo "$case: exit $code, ${#line} characters: $line"
}
check "1 MB value" 1000000 "$kpipe" run "$work/value.toml"
check "1 MB key" 1000000 "$kpipe" run "$work/key.toml"
check "60 KB command-line value" 60000 "$kpipe" plan inputs/quickstart.toml "model.kind=${long:0:60000}"
echo "$failures failures"
[ "$failures" -eq 0 ]
