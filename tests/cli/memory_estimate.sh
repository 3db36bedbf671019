#!/usr/bin/env bash
# Each rank's memory estimate is within 10% of its measured peak resident
# memory on the quickstart, on this CPU's own GEMM path and on the path an
# AVX2-only CPU (AMD Zen 3) takes — ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN and
# kpipe's own kernels, OPENBLAS_CORETYPE=Haswell OpenBLAS — for the vendor,
# packed and portable GEMMs: whatever a library allocates on first use must
# be resident before the estimate takes its baseline. Then the same on models
# whose activations weigh (an MLP 1,024 wide, a transformer) at p = 2 and 4
# under 1F1B and the memory levers V-Half and V-Min, the transformer also
# with selective recomputation, and both on d = 2 replicas with and without
# the distributed optimizer.
# Usage: memory_estimate.sh MPIEXEC KPIPE
set -uo pipefail
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# Each rank of the run in "$work/run.json" within 10%; the case named in $1.
check() {
  /usr/bin/python3 - "$work/run.json" "$1" <<'PY' || failures=$((failures + 1))
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
}

# run CASE RANKS KPIPE-ARGUMENTS...: the run, in the variables of the
# array `environment`, then its check.
environment=()
run() {
  local case=$1 ranks=$2
  shift 2
  if ! env "${environment[@]}" "$mpiexec" -n "$ranks" --oversubscribe "$kpipe" run "$@" --json "$work/run.json" \
    >"$work/log" 2>&1; then
    echo "FAIL: $case: the run failed: $(tail -3 "$work/log")"
    failures=$((failures + 1))
    return
  fi
  check "$case"
}

for isa in native avx2; do
  for gemm in vendor packed portable; do
    environment=()
    [ "$isa" = avx2 ] && environment=(ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell)
    run "$isa $gemm" 2 inputs/quickstart.toml train.steps=10 compute.gemm="$gemm"
  done
done
environment=()

mlp=(inputs/v-half.toml "model.hidden=[1024,1024,1024,1024,1024,1024,1024]" model.input_dim=1024
  train.microbatch_size=128 train.global_batch=2048)
transformer=(inputs/kjv-char.toml data.source=synthetic model.layers=6 train.global_batch=64 train.eval_every=0
  checkpoint.every=0)
for p in 2 4; do
  for schedule in 1f1b v-half v-min; do
    v=2
    [ "$schedule" = 1f1b ] && v=1
    levers=("pipeline.stages=$p" "pipeline.schedule=$schedule" "pipeline.virtual_stages=$v" train.steps=3)
    run "mlp p=$p $schedule" "$p" "${mlp[@]}" "${levers[@]}"
    run "transformer p=$p $schedule" "$p" "${transformer[@]}" "${levers[@]}"
    run "transformer p=$p $schedule selective" "$p" "${transformer[@]}" "${levers[@]}" pipeline.recompute=selective
  done
done
# d = 2 replicas (4 ranks): the gradient sums' temporaries in MPI, and the
# distributed optimizer's half of the state.
for distributed in false true; do
  replicas=(pipeline.stages=2 pipeline.schedule=1f1b pipeline.virtual_stages=1 pipeline.data_parallel=2
    train.optimizer=adamw train.steps=3 "train.distributed_optimizer=$distributed")
  run "mlp p=2 d=2 distributed optimizer $distributed" 4 "${mlp[@]}" "${replicas[@]}"
  run "transformer p=2 d=2 distributed optimizer $distributed" 4 "${transformer[@]}" "${replicas[@]}"
done
echo "$failures failures"
[ "$failures" -eq 0 ]
