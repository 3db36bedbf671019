#!/usr/bin/env bash
# kpipe's benchmark suite in one command (docs/performance-log.md, "Benchmark
# suite"): kernel efficiency (GEMM against cblas_sgemm, attention,
# elementwise), pipeline efficiency (measured against simulated bubble per
# schedule, and p = 2 over sequential), the microbatch-size sweep, memory per
# schedule and recompute mode, the transformer, and the PyTorch peers (the
# MLP sequential and 1F1B p = 2, kpipe then PyTorch in this same run; the
# transformer through benchmarks/peers/compare_transformer.sh). Every result
# is a JSON file in DIR; DIR/summary.md is the table of all of them.
#
#   scripts/bench.sh [--quick] [--out DIR] [--build DIR] [--jobs N]
#
#   --quick      fewer steps, shapes and rounds: a few minutes on 2 cores
#   --out DIR    where the results go (default: bench-results)
#   --build DIR  the build to use, configured with benchmarks if it is not
#                (default: build)
#   --jobs N     build jobs (default: 1; the development machine is shared)
set -euo pipefail

usage() {
  sed -n '11,17p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
out="bench-results"
build=$root/build
jobs=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; usage ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(mkdir -p "$build" && cd "$build" && pwd)
python=/usr/bin/python3  # Debian's, with numpy and torch (the first python3 on PATH may lack them)

say() { echo "bench.sh: $*" >&2; }

# Quick mode keeps every part but with fewer steps, shapes and rounds.
if [[ $quick -eq 1 ]]; then
  steps=5 kernel_filter='BM_(gemm_vendor|gemm_portable|cblas_sgemm)/(32|1024)/|BM_deep_copy|BM_add|BM_activation_forward|BM_attention_(gemm|fused)/256'
  kernel_args=(--benchmark_min_time=0.1) sweep_sizes=8,16,32,64 rounds=1 transformer_steps=10
else
  steps=20 kernel_filter=. kernel_args=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  sweep_sizes=4,8,16,32,64,128 rounds=3 transformer_steps=20
fi

# --- build -------------------------------------------------------------------
if ! grep -qs '^KPIPE_ENABLE_BENCHMARKS:BOOL=ON' "$build/CMakeCache.txt"; then
  say "configuring $build with benchmarks"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKPIPE_ENABLE_BENCHMARKS=ON >/dev/null
fi
cmake --build "$build" -j "$jobs" --target kpipe kernels_benchmark pipeline_benchmark transformer_benchmark \
  action_overhead_benchmark >&2
kpipe=$build/src/app/kpipe
bench=$build/benchmarks
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
export OMP_NUM_THREADS=1  # one thread per rank everywhere, as the PyTorch peers run
cd "$root"

# What ran where: the summary's header, and the context every number needs.
"$python" - "$out/environment.json" "$quick" <<'EOF'
import json, os, platform, subprocess, sys
def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"commit": run("git", "rev-parse", "--short", "HEAD"), "dirty": bool(run("git", "status", "--porcelain")),
           "quick": sys.argv[2] == "1", "cpu": cpu, "cores": os.cpu_count(), "host": platform.node(),
           "load_average_at_start": os.getloadavg()}, open(sys.argv[1], "w"), indent=2)
EOF

# --- kernels: GEMM against cblas_sgemm, elementwise against deep_copy, attention
say "kernels"
"$bench/kernels_benchmark" --benchmark_filter="$kernel_filter" "${kernel_args[@]}" \
  --benchmark_out="$out/kernels.json" --benchmark_out_format=json >/dev/null 2>"$out/kernels.log" ||
  { cat "$out/kernels.log" >&2; exit 1; }

# --- pipeline efficiency: measured against simulated bubble per schedule on p = 2;
# each run also times the sequential trainer, so 1f1b's gives the p = 2 speed-up.
deck=benchmarks/decks/compute_bound.toml
schedules=(gpipe 1f1b interleaved zb-h1 zb-h2 zb-v)
chunks() { case $1 in interleaved|zb-v) echo 2 ;; *) echo 1 ;; esac; }
for schedule in "${schedules[@]}"; do
  say "pipeline $schedule"
  mpirun -n 2 "$bench/pipeline_benchmark" "$deck" "pipeline.schedule=$schedule" \
    "pipeline.virtual_stages=$(chunks "$schedule")" "train.steps=$steps" >"$out/pipeline-$schedule.json"
done

# --- the fixed cost per action kind: actions of next to no work (layers 1
# wide, one sample per microbatch) through the executor, at 2 and 4 ranks.
for ranks in 2 4; do
  say "action overhead, $ranks ranks"
  mpirun -n "$ranks" --oversubscribe "$bench/action_overhead_benchmark" benchmarks/decks/zero_work.toml \
    "pipeline.stages=$ranks" >"$out/action-overhead-$ranks.json"
done

# --- memory per schedule and recompute mode: the run's estimate, predicted and
# measured peak stash and peak resident memory per rank (kpipe run --json).
for schedule in "${schedules[@]}"; do
  for recompute in none full; do
    say "memory $schedule recompute=$recompute"
    mpirun -n 2 "$kpipe" run "$deck" "pipeline.schedule=$schedule" "pipeline.virtual_stages=$(chunks "$schedule")" \
      "pipeline.recompute=$recompute" train.steps=3 --json "$out/memory-$schedule-$recompute.json" >/dev/null
  done
done

# --- data-parallel gradient sums: p = 2, d = 2 (4 ranks) with the sums
# overlapped with the last backward and the cool-down, and after it.
for overlap in true false; do
  say "gradient sums overlap=$overlap"
  mpirun -n 4 --oversubscribe "$kpipe" run "$deck" pipeline.data_parallel=2 "pipeline.overlap_grad_reduce=$overlap" \
    "train.steps=$steps" --json "$out/gradient-sum-$overlap.json" >/dev/null
done

# --- tensor parallelism: the transformer at kjv-char's shapes (4 blocks of
# width 128, 4 heads, T = 64, b = 8) on synthetic tokens (vocab 64: t must
# divide it, and the KJV text has 63 characters), as (p, t, d) = (2, 1, 1),
# (1, 2, 1) and (2, 2, 1): step time, the calibrated simulator's step, and
# the bytes per step and link, measured and predicted.
tp_shape=(model.context=64 model.dim=128 model.layers=4 train.microbatch_size=8 "train.steps=$steps")
for grid in 2,1,1 1,2,1 2,2,1; do
  IFS=, read -r p t d <<<"$grid"
  say "tensor parallelism p=$p t=$t d=$d"
  mpirun -n $((p * t * d)) --oversubscribe "$kpipe" run inputs/tensor_parallel.toml "${tp_shape[@]}" \
    "pipeline.stages=$p" "pipeline.tensor_parallel=$t" "pipeline.data_parallel=$d" \
    --json "$out/tensor-parallel-$p$t$d.json" >/dev/null
done

# --- microbatch-size sweep (kpipe sweep, from the calibrated-simulator work;
# a kpipe without it says so, and this part is skipped with that note).
say "sweep"
if "$kpipe" sweep --help 2>/dev/null | grep -q -- --sizes; then
  mpirun -n 2 "$kpipe" sweep "$deck" --sizes "$sweep_sizes" --steps "$steps" --json "$out/sweep.json" >/dev/null
  "$python" benchmarks/plot_sweep.py "$out/sweep.png" "$out/sweep.json"
else
  # The stub refuses with one line saying what to use instead; keep it as the note.
  note=$("$kpipe" sweep "$deck" 2>&1 | grep -m1 'kpipe: error' || true)
  say "no kpipe sweep in this build; skipped (${note:-no message})"
  "$python" -c 'import json, sys; print(json.dumps({"skipped": sys.argv[1]}))' "${note:-kpipe sweep is missing}" \
    >"$out/sweep.json"
fi

# --- the transformer: sequential with its attention / Linear / rest shares, and 1F1B p = 2
say "transformer"
mpirun -n 2 "$bench/transformer_benchmark" inputs/kjv-char.toml "$transformer_steps" >"$out/transformer.json"

# --- peer comparison, MLP: issue 12's model (1024 wide, 8 hidden layers,
# b = 32, m = 8; the compute-bound deck's ReLU, softmax cross-entropy and SGD),
# kpipe then PyTorch, ROUNDS times in turn so that both see the same machine.
peer=(model.input_dim=1024 "model.hidden=[1024,1024,1024,1024,1024,1024,1024,1024]" train.global_batch=256)
for round in $(seq "$rounds"); do
  say "peer MLP, round $round: kpipe sequential (with its Linear share), kpipe 1F1B p = 2, PyTorch both"
  # Without mpirun and on 1 rank: the sequential trainer alone, profiled by region.
  "$bench/transformer_benchmark" "$deck" "$steps" "${peer[@]}" >"$out/peer-mlp-kpipe-sequential-$round.json"
  mpirun -n 2 "$bench/pipeline_benchmark" "$deck" "${peer[@]}" "train.steps=$steps" \
    >"$out/peer-mlp-kpipe-1f1b-$round.json"
  "$python" benchmarks/peers/torch_mlp_pipeline.py "$deck" "${peer[@]}" --mode sequential --steps "$steps" \
    >"$out/peer-mlp-pytorch-sequential-$round.json"
  "$python" benchmarks/peers/torch_mlp_pipeline.py "$deck" "${peer[@]}" --mode 1f1b --steps "$steps" \
    >"$out/peer-mlp-pytorch-1f1b-$round.json"
done

# --- peer comparison, transformer (needs examples/lm/kjv.txt; made here when
# Debian's bible-kjv is installed, skipped with a note otherwise).
if [[ ! -f examples/lm/kjv.txt ]] && command -v bible >/dev/null 2>&1; then
  examples/lm/prepare_kjv.sh examples/lm/kjv.txt >&2
fi
if [[ -f examples/lm/kjv.txt ]]; then
  say "peer transformer"
  KPIPE_BUILD=$build benchmarks/peers/compare_transformer.sh "$rounds" "$transformer_steps" \
    >"$out/peer-transformer.jsonl"
else
  echo '{"skipped": "examples/lm/kjv.txt is missing (examples/lm/prepare_kjv.sh makes it)"}' \
    >"$out/peer-transformer.jsonl"
fi

"$python" benchmarks/summarise.py "$out" >"$out/summary.md"
say "done: $out/summary.md"
