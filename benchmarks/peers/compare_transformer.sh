#!/usr/bin/env bash
# kpipe's sequential trainer against the PyTorch peer on the character
# transformer (inputs/kjv-char.toml), one thread each, taking turns so both see
# the same machine: ROUNDS x (PyTorch, kpipe b = 8, kpipe b = 32); one JSON
# object per measurement on stdout (docs/performance-log.md, "Transformer").
# OVERRIDES, one word each, go to the kpipe runs only (compute.gemm=packed).
#
#   benchmarks/peers/compare_transformer.sh [ROUNDS] [STEPS] ["OVERRIDES"]
set -euo pipefail
rounds=${1:-3}
steps=${2:-20}
read -ra overrides <<<"${3:-}"
root=$(cd "$(dirname "$0")/../.." && pwd)
text=$root/examples/lm/kjv.txt
benchmark=${KPIPE_BUILD:-$root/build}/benchmarks/transformer_benchmark
if [[ ! -f $text ]]; then
  echo "$0: $text is missing; make it with examples/lm/prepare_kjv.sh $text" >&2
  exit 2
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for _ in $(seq "$rounds"); do
  /usr/bin/python3 "$root/benchmarks/peers/torch_char_gpt.py" "$text" --steps "$steps" --eval-batches 1
  for b in 8 32; do
    "$benchmark" "$root/inputs/kjv-char.toml" "$steps" "train.microbatch_size=$b" pipeline.stages=1 "${overrides[@]}" |
      /usr/bin/python3 -c 'import json, sys; r = json.load(sys.stdin); s = r["sequential"]
print(json.dumps({"peer": "kpipe", "microbatch_size": '"$b"', "overrides": sys.argv[1], "tokens_per_second": s["tokens_per_second"], "cpu_tokens_per_second": s["cpu_tokens_per_second"], "share": s["share"]}))' "${3:-}"
  done
done
