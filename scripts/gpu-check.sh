#!/usr/bin/env bash
# Check and measure a GPU build of kpipe on a GPU node in one go, inside a
# time budget (a short allocation, or a lent machine): unit and MPI tests on
# the device, the default and benchmark decks, the kernel benchmarks, the
# PyTorch peers on the same GPU and the portability study's GPU platform.
#
#   scripts/gpu-check.sh [--phases LIST] [--budget SECONDS] BUILD_DIR OUT_DIR
#
#   BUILD_DIR         a build against a Kokkos with CUDA (scripts/build-against.sh
#                     /opt/kokkos-cuda --no-test -- -DKPIPE_ENABLE_BENCHMARKS=ON)
#   OUT_DIR           summary.txt (one line per step: exit code, verdict,
#                     throughput) and each step's log and JSON
#   --phases LIST     comma-separated, in this order (default: all):
#                     info, unit, runs, mpi, large, overhead, bench, peer, study
#   --budget SECONDS  the whole run's wall time (default 480); a step that
#                     would not fit is cut at the budget or skipped, and says so
#
# The checks (unit and MPI tests, the default decks' runs) share the GPU side
# by side, with no rank binding; then the timed phases run one job at a time:
# large (GPT-2 small, 124M parameters, on synthetic tokens: sequential in fp32
# and bf16 with the fused and the GEMM attention, and p = 2), overhead (the
# fixed cost per action kind), bench, peer, study. Tests not built are skipped.
# The peers need python3 with torch (CUDA). Run from anywhere; mpirun from PATH.
set -uo pipefail

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

phases=info,unit,runs,mpi,large,overhead,bench,peer,study
budget=480
while [[ $# -gt 0 ]]; do
  case $1 in
    --phases) phases=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu-check.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[[ $# -eq 2 ]] || usage
build=$(cd "$1" 2>/dev/null && pwd) || { echo "gpu-check.sh: no build directory $1" >&2; exit 2; }
[[ -x $build/src/app/kpipe ]] || { echo "gpu-check.sh: $build/src/app/kpipe is missing; build kpipe first" >&2; exit 2; }
mkdir -p "$2" && out=$(cd "$2" && pwd)
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/mpi-env.sh
source scripts/mpi-env.sh

start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
limit() { local l=$(($(left) - 10)); echo $((l < $1 ? l : $1)); }  # a step's timeout inside the budget
note() { echo "[$((SECONDS - start))s] $*" | tee -a "$out/summary.txt"; }
has() { [[ ,$phases, == *,$1,* ]]; }
kpipe=$build/src/app/kpipe

# One Catch2 binary (or mpirun of one): exit code and Catch2's last verdict.
check() {
  local name=$1 seconds=$2
  shift 2
  timeout "$seconds" "$@" >"$out/$name.txt" 2>&1
  note "$name rc=$? $(grep -E '^(All tests passed|test cases:)' "$out/$name.txt" | tail -1)"
}

# One `kpipe run`: exit code, throughput and last loss from its JSON.
deck_run() {
  local name=$1 ranks=$2
  shift 2
  timeout "$(limit 90)" mpirun -n "$ranks" "$kpipe" run "$@" --json "$out/run-$name.json" >"$out/run-$name.txt" 2>&1
  note "run $name rc=$? $(python3 - "$out/run-$name.json" 2>/dev/null <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
rate = {k: round(v) for k, v in r.items() if k.endswith("per_second")}
print(rate, "losses", r.get("losses", [None])[0], "->", r.get("losses", [None])[-1])
EOF
)"
}

if has info; then
  { nvidia-smi; nvidia-smi -q -d CLOCK; uname -a; nproc; ldd "$kpipe"; "$kpipe" --version; } >"$out/info.txt" 2>&1
  note "info: $(nvidia-smi -L 2>&1 | head -1); $("$kpipe" --version 2>&1 | head -1)"
fi

# Checks share the GPU side by side, so no job binds its ranks to the first cores.
export OMPI_MCA_hwloc_base_binding_policy=none
if has unit; then
  for test in tensor/test_tensor kernels/test_kernels model/test_model runtime/test_runtime; do
    [[ -x $build/tests/unit/$test ]] || { note "$(basename $test) not built: skipped"; continue; }
    check "$(basename $test)" "$(limit 150)" "$build/tests/unit/$test" &
  done
fi
if has mpi; then
  # The MPI tests at their smallest rank counts, and training at 4 (the
  # longest, about 250 s on an H200 beside the others); those not built are
  # skipped.
  for spec in runtime/test_pipeline_training:2 runtime/test_pipeline_training:4 comm/test_comm:2 \
    io/test_checkpoint:2 runtime/test_tensor_parallel:2 runtime/test_tensor_parallel_training:4 \
    runtime/test_activation_store:2 runtime/test_activation_dump:2 runtime/test_serve:2 \
    runtime/test_post_validation:2; do
    test=${spec%:*} ranks=${spec#*:}
    [[ -x $build/tests/mpi/$test ]] || { note "$(basename "$test") not built: skipped"; continue; }
    check "$(basename "$test")-np$ranks" "$(limit 300)" mpirun -n "$ranks" "$build/tests/mpi/$test" &
  done
fi
if has runs; then
  deck_run quickstart-p2 2 inputs/quickstart.toml
  deck_run quickstart-sequential 1 inputs/quickstart.toml pipeline.stages=1
  deck_run compute_bound-p2 2 benchmarks/decks/compute_bound.toml
  deck_run kjv-char-p2 2 inputs/kjv-char.toml train.steps=20
  deck_run kjv-char-bf16-p2 2 inputs/kjv-char-bf16.toml train.steps=20
fi
wait
unset OMPI_MCA_hwloc_base_binding_policy

# Four steps: the deck's checkpoint (every 5) is not written.
if has large; then
  gpt2=(inputs/gpt2-small.toml train.steps=4)
  deck_run gpt2-small-sequential 1 "${gpt2[@]}" pipeline.stages=1
  deck_run gpt2-small-gemm-attention-sequential 1 "${gpt2[@]}" pipeline.stages=1 compute.attention=gemm
  deck_run gpt2-small-bf16-sequential 1 "${gpt2[@]}" pipeline.stages=1 compute.precision=bf16
  deck_run gpt2-small-bf16-gemm-attention-sequential 1 "${gpt2[@]}" pipeline.stages=1 compute.precision=bf16 \
    compute.attention=gemm
  deck_run gpt2-small-p2 2 "${gpt2[@]}"
fi

if has overhead && (($(left) > 40)); then
  timeout "$(limit 60)" mpirun -n 2 "$build/benchmarks/action_overhead_benchmark" benchmarks/decks/zero_work.toml \
    >"$out/action-overhead.json" 2>"$out/action-overhead.log"
  note "action_overhead_benchmark rc=$?"
fi

if has bench && (($(left) > 60)); then
  timeout "$(limit 90)" "$build/benchmarks/kernels_benchmark" \
    --benchmark_filter='BM_gemm_(vendor|portable)/|BM_attention|BM_add|BM_adamw|BM_deep_copy' \
    --benchmark_min_time=0.05 --benchmark_format=json >"$out/kernels.json" 2>"$out/kernels.log"
  note "kernels_benchmark rc=$?"
fi

if has peer; then
  for precision in fp32 bf16; do
    (($(left) > 90)) || { note "peer $precision skipped: out of time"; continue; }
    deck=benchmarks/decks/compute_bound.toml autocast=()
    [[ $precision == bf16 ]] && deck=benchmarks/decks/compute_bound-bf16.toml autocast=(--bf16)
    timeout "$(limit 60)" mpirun -n 2 "$build/benchmarks/pipeline_benchmark" "$deck" \
      >"$out/kpipe-mlp-$precision.json" 2>"$out/kpipe-mlp-$precision.log"
    note "kpipe mlp $precision rc=$?"
    timeout "$(limit 60)" mpirun -n 2 "$build/benchmarks/transformer_benchmark" inputs/kjv-char.toml 20 \
      "compute.precision=$precision" >"$out/kpipe-kjv-$precision.json" 2>"$out/kpipe-kjv-$precision.log"
    note "kpipe kjv-char $precision rc=$?"
    timeout "$(limit 60)" python3 benchmarks/peers/torch_mlp_pipeline.py "$deck" --mode sequential --device cuda \
      >"$out/torch-mlp-$precision.json" 2>"$out/torch-mlp-$precision.log"
    note "torch mlp $precision rc=$?"
    timeout "$(limit 60)" python3 benchmarks/peers/torch_char_gpt.py examples/lm/kjv.txt --steps 20 \
      --eval-batches 1 --device cuda "${autocast[@]}" >"$out/torch-kjv-$precision.json" 2>"$out/torch-kjv-$precision.log"
    note "torch kjv-char $precision rc=$?"
  done
fi

if has study && (($(left) > 60)); then
  timeout "$(limit 150)" examples/portability/run.sh --quick --rounds 1 --out "$out/study" "$build" >"$out/study.log" 2>&1
  note "portability study rc=$?"
fi
note "done"
