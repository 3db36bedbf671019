#!/usr/bin/env bash
# README command 2: install what is missing, build kpipe with its tests and run
# the whole suite (unit, MPI, CLI, consumer, and the job scripts under a
# one-node Slurm that ctest's fixture starts and stops), then the unit and CLI
# tests again under AddressSanitizer and UndefinedBehaviorSanitizer, with the
# MPI fault, messaging and serving tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
source scripts/mpi-env.sh
jobs=$(nproc)

cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DKPIPE_ENABLE_TESTS=ON >/dev/null
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"

# Open MPI's own allocations are not ours to report: leak checks stay off.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKPIPE_ENABLE_TESTS=ON -DKPIPE_ENABLE_SANITIZERS=ON >/dev/null
cmake --build build-sanitize -j "$jobs"
ctest --test-dir build-sanitize --output-on-failure -j "$jobs" -L "unit|cli|fault|fuzz"
# Of the MPI tests, the run-time messaging of kpipe serve (the mailbox, the
# serving executor) and the tensor-parallel collectives: their buffers are
# formed at run time, where a sanitizer finds what a fixed schedule cannot.
ctest --test-dir build-sanitize --output-on-failure -j "$jobs" -R "^test_comm_np|^test_serve_np|^test_tensor_parallel_np|^cli_serve_trace$"
