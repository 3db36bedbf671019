#!/usr/bin/env bash
# Configure, build and test kpipe against the Kokkos installed under a
# prefix, e.g. a Spack or site build with CUDA, or a newer Kokkos than the
# distribution's. Nothing is downloaded.
#
#   scripts/build-against.sh KOKKOS_PREFIX [options] [-- extra cmake arguments]
#
#   --build-dir DIR  build directory (default: build-<basename of KOKKOS_PREFIX>)
#   --target NAME    build only this target, and run only the test of that
#                    name; repeatable (default: build everything, run the
#                    whole suite: unit, CLI, MPI, consumer)
#   --jobs N         parallel build and test jobs (default: 2)
#   --no-test        build only (e.g. a CUDA build on a machine without a GPU)
#
# The C++ compiler is the one Kokkos needs: the prefix's nvcc_wrapper when that
# Kokkos has CUDA, otherwise $CXX or the system default.
set -euo pipefail

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

[[ $# -ge 1 ]] || usage
[[ $1 == -h || $1 == --help ]] && usage 0
prefix=$(cd "$1" 2>/dev/null && pwd) || {
  echo "build-against.sh: no directory $1; give the install prefix of a Kokkos build" >&2
  exit 2
}
shift

source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$source_dir/build-$(basename "$prefix")"
jobs=2
run_tests=1
targets=()
cmake_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --no-test) run_tests=0; shift ;;
    --) shift; cmake_args+=("$@"); break ;;
    *) echo "build-against.sh: unknown option $1" >&2; usage ;;
  esac
done

config_header=$(find "$prefix/include" -name KokkosCore_config.h -print -quit 2>/dev/null || true)
if [[ -z $config_header ]]; then
  echo "build-against.sh: $prefix/include has no KokkosCore_config.h; is $prefix a Kokkos install prefix?" >&2
  exit 2
fi
if grep -q '^#define KOKKOS_ENABLE_CUDA$' "$config_header"; then
  compiler="$prefix/bin/nvcc_wrapper"
  [[ -x $compiler ]] || { echo "build-against.sh: Kokkos has CUDA but $compiler is missing" >&2; exit 2; }
else
  compiler=${CXX:-c++}
fi
# KOKKOS_VERSION is major * 10000 + minor * 100 + patch (the comments above
# the #define name it too, hence the anchored match).
version_number=$(sed -n 's/^#define KOKKOS_VERSION \([0-9][0-9]*\)[[:space:]]*$/\1/p' "$config_header" | head -n 1)
if [[ -n $version_number ]]; then
  version="$((version_number / 10000)).$((version_number / 100 % 100)).$((version_number % 100))"
else
  version="(version unknown: no #define KOKKOS_VERSION in $config_header)"
fi
echo "build-against.sh: Kokkos $version from $prefix, compiler $compiler, build directory $build_dir"

cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKokkos_ROOT="$prefix" -DCMAKE_CXX_COMPILER="$compiler" "${cmake_args[@]}"

build=(cmake --build "$build_dir" -j "$jobs")
for target in "${targets[@]}"; do build+=(--target "$target"); done
"${build[@]}"

if [[ $run_tests -eq 1 ]]; then
  selection=()
  if [[ ${#targets[@]} -gt 0 ]]; then
    selection=(-R "^($(IFS='|'; echo "${targets[*]}"))\$")
  fi
  # The MPI tests need what this machine needs to launch ranks (root, oversubscription).
  # shellcheck source=scripts/mpi-env.sh
  source "$source_dir/scripts/mpi-env.sh"
  # One BLAS thread, and a bound OpenMP pool of two threads, as on CI.
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=${OMP_PROC_BIND:-spread} \
    OMP_PLACES=${OMP_PLACES:-threads} ctest --test-dir "$build_dir" "${selection[@]}" -j "$jobs" --output-on-failure
fi
