#!/usr/bin/env bash
# Uniform (Sarathi) against request batching (README.md here): the same
# trace served on p = 2 and p = 4 ranks with each policy, several rounds
# alternating the policies, every run's `kpipe serve --json` kept, the SVG
# timelines (measured above simulated) of the first round, and report.py's
# markdown table of medians: tokens/s, bubble and latencies, measured beside
# the serving simulator's prediction from the fitted stage costs.
#
#   examples/inference/compare_policies.sh [--rounds N] [--out DIR] [--trace FILE] [key=value ...]
#
#   --rounds N    rounds per configuration (default 3)
#   --out DIR     results (default: serving-results)
#   --trace FILE  requests (default: examples/inference/synthetic.jsonl)
#   key=value     deck overrides, e.g. inference.token_budget=128
set -euo pipefail

usage() {
  sed -n '9,14p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=3
out="serving-results"
trace=$root/examples/inference/synthetic.jsonl
overrides=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --trace) trace=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *=*) overrides+=("$1"); shift ;;
    *) echo "compare_policies.sh: unknown option $1" >&2; usage ;;
  esac
done
kpipe=${KPIPE:-$root/build/src/app/kpipe}
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p "$out"

# The deck's model on synthetic data (no text file needed: the synthetic
# trace gives token ids) and model.seed's weights: serving costs do not
# depend on what the weights say.
for round in $(seq 1 "$rounds"); do
  for p in 2 4; do
    for policy in request uniform; do
      name=$out/p$p-$policy-$round
      svg=()
      [[ $round == 1 ]] && svg=(--svg "$name.svg")
      mpirun --oversubscribe -n "$p" "$kpipe" serve "$root/inputs/kjv-serve.toml" "requests=$trace" \
        data.source=synthetic pipeline.stages="$p" inference.batching="$policy" inference.temperature=0 \
        "${overrides[@]}" --json "$name.json" "${svg[@]}" >"$name.log" 2>&1
    done
  done
done
/usr/bin/python3 "$root/examples/inference/report.py" "$out"
