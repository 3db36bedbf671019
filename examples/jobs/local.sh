#!/usr/bin/env bash
# Train a deck on this machine: p * d MPI ranks, host backend.
#   examples/jobs/local.sh inputs/1f1b.toml [key=value ...]
# The rank count is read from the deck (pipeline.stages * pipeline.data_parallel),
# so the deck alone decides the layout.
set -euo pipefail
deck=${1:?usage: local.sh DECK [key=value ...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
kpipe=${KPIPE:-$root/build/src/app/kpipe}
source "$root/scripts/mpi-env.sh"
ranks=$("$kpipe" deck "$deck" "$@" | sed -n 's/.*(world size \([0-9]*\)).*/\1/p')
exec mpirun -n "$ranks" "$kpipe" run "$deck" "$@"
