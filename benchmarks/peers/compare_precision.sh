#!/usr/bin/env bash
# float32 against bfloat16 (compute.precision) in kpipe and in PyTorch
# (torch.autocast), taking turns in one run so all see the same machine: the
# compute-bound MLP (benchmarks/decks/compute_bound.toml and its -bf16 twin;
# sequential and 1F1B, p = 2) and the character transformer
# (inputs/kjv-char.toml; sequential and 1F1B, p = 2), one thread per rank. ROUNDS x every measurement; one JSON
# object per measurement on stdout (docs/performance-log.md, "Mixed precision").
#
#   benchmarks/peers/compare_precision.sh [ROUNDS] [TRANSFORMER_STEPS]
set -euo pipefail
rounds=${1:-3}
steps=${2:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KPIPE_BUILD:-$root/build}
text=$root/examples/lm/kjv.txt
if [[ ! -f $text ]]; then
  echo "$0: $text is missing; make it with examples/lm/prepare_kjv.sh $text" >&2
  exit 2
fi
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
peers=$root/benchmarks/peers
# One line per figure: {"peer", "model", "mode", "precision", "per_second", "unit"}.
emit() {
  /usr/bin/python3 -c 'import json, sys
print(json.dumps({"peer": sys.argv[1], "model": sys.argv[2], "mode": sys.argv[3], "precision": sys.argv[4],
                  "per_second": float(sys.argv[5]), "unit": sys.argv[6]}))' "$@"
}
field() { /usr/bin/python3 -c 'import json, sys; r = json.load(sys.stdin)
for key in sys.argv[1:]: r = r[key]
print(r)' "$@"; }

for _ in $(seq "$rounds"); do
  for precision in fp32 bf16; do
    deck=$root/benchmarks/decks/compute_bound.toml
    [[ $precision == bf16 ]] && deck=$root/benchmarks/decks/compute_bound-bf16.toml
    result=$(mpirun -n 2 "$build/benchmarks/pipeline_benchmark" "$deck")
    emit kpipe mlp sequential "$precision" "$(field sequential samples_per_second <<<"$result")" samples
    emit kpipe mlp 1f1b "$precision" "$(field pipeline samples_per_second <<<"$result")" samples
    for mode in sequential 1f1b; do
      result=$(/usr/bin/python3 "$peers/torch_mlp_pipeline.py" "$deck" --mode "$mode")
      emit pytorch mlp "$mode" "$precision" "$(field samples_per_second <<<"$result")" samples
    done

    result=$(mpirun -n 2 "$build/benchmarks/transformer_benchmark" "$root/inputs/kjv-char.toml" "$steps" \
      "compute.precision=$precision")
    emit kpipe kjv-char sequential "$precision" "$(field sequential tokens_per_second <<<"$result")" tokens
    emit kpipe kjv-char 1f1b "$precision" "$(field pipelined tokens_per_second <<<"$result")" tokens
    autocast=()
    [[ $precision == bf16 ]] && autocast=(--bf16)
    result=$(/usr/bin/python3 "$peers/torch_char_gpt.py" "$text" --steps "$steps" --eval-batches 1 "${autocast[@]}")
    emit pytorch kjv-char sequential "$precision" "$(field tokens_per_second <<<"$result")" tokens
    result=$(/usr/bin/python3 "$peers/torch_char_gpt.py" "$text" --steps "$steps" --mode 1f1b "${autocast[@]}")
    emit pytorch kjv-char 1f1b "$precision" "$(field tokens_per_second <<<"$result")" tokens
  done
done
