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
# shellcheck source=examples/jobs/deck-ranks.sh
source "$root/examples/jobs/deck-ranks.sh"
ranks=$(deck_ranks "$kpipe" "$deck" "$@")
exec mpirun -n "$ranks" "$kpipe" "$command" "$deck" "$@"
