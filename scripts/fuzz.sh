#!/usr/bin/env bash
# Fuzzes every reader of hostile input: builds the libFuzzer harnesses of
# tests/fuzz with clang (ASan, UBSan, leak checks) and runs each for SECONDS
# (default 600) on its corpus and seeds, then merges what it found that adds
# coverage into tests/fuzz/corpus/<name>/ (commit those; the default suite
# replays them). A crash, hang (> 10 s an input), leak or allocation over
# 512 MB stops that harness; the input is kept in build-fuzz/artifacts/.
# The HDF5 readers walk each file in a child process first (src/io/
# hdf5_check.hpp): libhdf5's own crashes there end only the child, and kpipe
# refuses the file in one line, which is what the harness checks.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]     e.g. scripts/fuzz.sh 60 deck profile
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; install clang and libclang-rt-dev (Debian) and run again" >&2
  exit 2
fi

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DKPIPE_ENABLE_TESTS=OFF -DKPIPE_ENABLE_FUZZING=ON >/dev/null
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  mapfile -t harnesses < <(sed -n 's/^kpipe_add_fuzz_target(\([a-z_]*\) .*/\1/p' tests/fuzz/CMakeLists.txt)
fi
cmake --build build-fuzz -j "$(nproc)" --target "${harnesses[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:max_allocation_size_mb=512 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp
export OPENBLAS_NUM_THREADS=1
mkdir -p build-fuzz/artifacts
status=0
for name in "${harnesses[@]}"; do
  fuzzer=build-fuzz/tests/fuzz/fuzz_$name
  corpus=tests/fuzz/corpus/$name
  mapfile -t seeds < "$fuzzer.seeds"
  found=$(mktemp -d)
  mkdir -p "$corpus"
  echo "fuzz.sh: $name for ${seconds}s"
  if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
         -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name-" "$found" "${seeds[@]}" \
         2> "build-fuzz/artifacts/$name.log"; then
    echo "fuzz.sh: $name FAILED; see build-fuzz/artifacts/$name.log" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/artifacts/$name.log" || true
  "$fuzzer" -merge=1 "$corpus" "$found" 2>/dev/null
  rm -rf "$found"
done
exit $status
