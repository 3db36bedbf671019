#!/usr/bin/env bash
# README command 1: install what is missing, build kpipe (Release) and run the
# main job on the default deck on 2 MPI ranks with the host backend.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKPIPE_ENABLE_TESTS=OFF >/dev/null
cmake --build build
source scripts/mpi-env.sh
mpirun -n 2 build/src/app/kpipe run inputs/quickstart.toml "$@"
