#!/usr/bin/env bash
# Each rank's memory estimate is within 10% of its measured peak resident
# memory on the quickstart, on this CPU's own GEMM path and on the path an
# AVX2-only CPU (AMD Zen 3) takes — ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN and
# kpipe's own kernels, OPENBLAS_CORETYPE=Haswell OpenBLAS — for the vendor,
# packed and portable GEMMs: whatever a library allocates on first use must
# be resident before the estimate takes its baseline.
# Usage: memory_estimate.sh MPIEXEC KPIPE
set -uo pipefail
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for isa in native avx2; do
  for gemm in vendor packed portable; do
    environment=()
    [ "$isa" = avx2 ] && environment=(ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell)
    if ! env "${environment[@]}" "$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml train.steps=10 \
      compute.gemm="$gemm" --json "$work/run.json" >"$work/log" 2>&1; then
      echo "FAIL: $isa $gemm: the run failed: $(tail -3 "$work/log")"
      failures=$((failures + 1))
      continue
    fi
    /usr/bin/python3 - "$work/run.json" "$isa $gemm" <<'PY' || failures=$((failures + 1))
import json, sys
report, case = json.load(open(sys.argv[1])), sys.argv[2]
bad = 0
for r, rank in enumerate(report["ranks"]):
    estimate, peak = rank["estimated_memory_mib"], rank["peak_resident_mib"]
    within = abs(estimate - peak) <= 0.10 * peak
    print(f"{case} rank {r}: estimated {estimate:.1f} MiB, peak resident {peak:.1f} MiB" + ("" if within else "  FAIL"))
    bad += not within
sys.exit(bad)
PY
  done
done
echo "$failures failures"
[ "$failures" -eq 0 ]
