#!/usr/bin/env bash
# A stage that cannot be allocated (a 20,000,000-wide layer under ulimit -v,
# past the memory estimate with runtime.memory_limit_mib) on either rank of
# two ends the job within 5 s with exit 1 and one line naming that rank: the
# other rank stops at set-up's agreement point instead of waiting in a
# communicator split the failing rank never joins.
# Usage: setup_allocation_failure.sh MPIEXEC KPIPE
set -uo pipefail
mpiexec=$1 kpipe=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for rank in 0 1; do
  # The wide layer is the second of three: partition [1, 2] puts it on rank 1, [2, 1] on rank 0.
  partition=$([ "$rank" -eq 1 ] && echo "[1, 2]" || echo "[2, 1]")
  start=$(date +%s%N)
  (
    ulimit -v 4194304
    timeout 60 "$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml "model.hidden=[64, 20000000]" model.output_dim=1 \
      "pipeline.partition=$partition" runtime.memory_limit_mib=1000000 >/dev/null 2>"$err"
  )
  code=$?
  milliseconds=$((($(date +%s%N) - start) / 1000000))
  case="the wide layer on rank $rank"
  [ "$code" -eq 1 ] || fail "$case: exit code $code"
  lines=$(grep -c "kpipe: error:" "$err")
  [ "$lines" -eq 1 ] || fail "$case: $lines kpipe error lines: $(cat "$err")"
  grep -q "kpipe: error: rank $rank: .*set-up.*allocate" "$err" || fail "$case: the error does not name rank $rank: $(cat "$err")"
  ((milliseconds < 5000)) || fail "$case: took $milliseconds ms"
  echo "$case: exit $code in ${milliseconds} ms"
done
echo "$failures failures"
[ "$failures" -eq 0 ]
