#!/usr/bin/env bash
# Step time and peak resident memory per rank under each recomputation
# (pipeline.recompute = none, selective, full), taking turns in one run so all
# see the same machine: `kpipe run DECK` on RANKS ranks, one thread each, for
# STEPS steps, ROUNDS times. One JSON object per run on stdout: the median
# step after the first two, every rank's peak resident MiB and the final loss
# (the same bits under every recomputation; docs/performance.md, the
# selective recomputation rows).
#
#   benchmarks/memory_levers.sh [ROUNDS] [STEPS] [RANKS] [DECK] [OVERRIDES...]
#
# The default deck is kjv-char on synthetic tokens (the corpus need not exist).
set -euo pipefail
rounds=${1:-3}
steps=${2:-100}
ranks=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
deck=${4:-$root/inputs/kjv-char.toml}
overrides=("${@:5}")
[[ $# -ge 5 ]] || overrides=(data.source=synthetic)
kpipe=${KPIPE_BUILD:-$root/build}/src/app/kpipe
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for round in $(seq "$rounds"); do
  for recompute in none selective full; do
    mpirun -n "$ranks" --oversubscribe "$kpipe" run "$deck" "${overrides[@]}" "train.steps=$steps" \
      train.eval_every=0 checkpoint.every=0 "pipeline.recompute=$recompute" --json "$work/run.json" >"$work/log" 2>&1 ||
      {
        echo "$0: the run with pipeline.recompute=$recompute failed: $(tail -1 "$work/log")" >&2
        exit 1
      }
    /usr/bin/python3 - "$work/run.json" "$recompute" "$round" <<'PY'
import json, statistics, sys
run, recompute, round_ = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
print(json.dumps({"recompute": recompute, "round": round_,
                  "median_step_seconds": statistics.median(run["step_seconds"][2:]),
                  "peak_resident_mib": [rank["peak_resident_mib"] for rank in run["ranks"]],
                  "estimated_mib": [rank["estimated_memory_mib"] for rank in run["ranks"]],
                  "final_loss": run["losses"][-1]}))
PY
  done
done
