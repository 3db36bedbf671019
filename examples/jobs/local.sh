#!/usr/bin/env bash
# Run a deck on this machine with p * t * d MPI ranks, host backend.
#   examples/jobs/local.sh run inputs/1f1b.toml [key=value ...]
#   examples/jobs/local.sh infer inputs/forward.toml
#   examples/jobs/local.sh serve inputs/kjv-serve.toml requests=examples/inference/kjv.jsonl
# The rank count is read from the deck (pipeline.stages * pipeline.tensor_parallel
# * pipeline.data_parallel), so the deck alone decides the layout.
set -euo pipefail
command=${1:?usage: local.sh run|infer|generate|serve DECK [key=value ...]}
deck=${2:?usage: local.sh run|infer|generate|serve DECK [key=value ...]}
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
kpipe=${KPIPE:-$root/build/src/app/kpipe}
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
# Only deck keys (section.key=value) decide the layout; options (--json FILE)
# and the command's own words (prompt=, requests=) are kpipe's to read.
deck_keys=()
for word in "$@"; do
  if [[ $word =~ ^[A-Za-z_]+\.[A-Za-z_.]+= ]]; then deck_keys+=("$word"); fi
done
ranks=$("$kpipe" deck "$deck" "${deck_keys[@]}" | sed -n 's/.*(world size \([0-9]*\)).*/\1/p')
exec mpirun -n "$ranks" "$kpipe" "$command" "$deck" "$@"
