#!/usr/bin/env bash
# Portability study (README.md here): the same decks on every kpipe build
# given, each in the rank x thread layouts its backend offers, next to that
# layout's measured GEMM and memory-bandwidth roofline; then report.py turns
# the JSON into architectural and application efficiency per platform and
# Pennycook's performance-portability metric, a table and a plot.
#
#   examples/portability/run.sh [--quick] [--rounds N] [--out DIR] BUILD_DIR [BUILD_DIR ...]
#
#   --quick     fewer steps and shorter roofline runs (about a minute per layout)
#   --rounds N  runs of every deck on every platform, taking turns (default 3):
#               the report takes each one's median, so a noisy minute on a
#               shared machine does not fall on one platform only
#   --out DIR   results (default: portability-results)
#
# Each BUILD_DIR needs src/app/kpipe and benchmarks/kernels_benchmark, e.g.
#   cmake --build build --target kpipe kernels_benchmark    (-DKPIPE_ENABLE_BENCHMARKS=ON)
#   scripts/build-against.sh /opt/kokkos-4.6-openmp --no-test --target kpipe --target kernels_benchmark \
#     -- -DCMAKE_CXX_STANDARD=20 -DKPIPE_ENABLE_BENCHMARKS=ON -DKPIPE_ENABLE_TESTS=OFF
set -euo pipefail

usage() {
  sed -n '8,19p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

root=$(cd "$(dirname "$0")/../.." && pwd)
quick=0
rounds=3
out="portability-results"
builds=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; shift ;;
    --rounds)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --rounds needs a positive whole number, not '${2:-}'" >&2; exit 2; }
      rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage ;;
    *) builds+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
[[ ${#builds[@]} -gt 0 ]] || usage
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"
# shellcheck source=scripts/mpi-env.sh
source scripts/mpi-env.sh

if [[ $quick -eq 1 ]]; then
  steps=20 roof_args=(--benchmark_min_time=0.3)
else
  steps=100 roof_args=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
fi
decks=(inputs/quickstart.toml benchmarks/decks/compute_bound.toml)
caller_bind=${OMP_PROC_BIND:-} caller_places=${OMP_PLACES:-}
say() { echo "portability: $*" >&2; }
# Nanoseconds per round trip of a cache line between two of a threaded rank's threads.
round_trip_ns() {
  "$1/benchmarks/kernels_benchmark" --benchmark_filter=BM_host_thread_round_trip --benchmark_min_time=0.1 \
    --benchmark_format=json 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print(round(1e9 / json.load(sys.stdin)["benchmarks"][0]["items_per_second"]))'
}

# A platform is a build in a layout: NAME, BUILD, BANNER, KOKKOS, RANKS and
# THREADS, tab-separated (the banner has spaces and bars).
platforms=()
for build in "${builds[@]}"; do
  for tool in src/app/kpipe benchmarks/kernels_benchmark; do
    [[ -x $build/$tool ]] || { echo "run.sh: $build/$tool is missing (see --help)" >&2; exit 2; }
  done
  # kpipe's first log line names the backend: "kpipe 0.1.0 | Kokkos 4.6.1 OpenMP (concurrency 2), MPI 1 rank".
  # (All of it is read, then cut: head would end kpipe early, which pipefail reports.)
  banner=$("$build/src/app/kpipe" plan inputs/quickstart.toml 2>&1)
  banner=${banner%%$'\n'*}
  kokkos=$(sed -n 's/.*| \(Kokkos [^ ]* [A-Za-z]*\).*/\1/p' <<<"$banner")
  # Layouts as RANKSxTHREADS. A threaded backend is also run as one rank whose
  # threads share the cores (pipeline.stages = 1), against one rank per core
  # (p = 2); a GPU build runs one rank on one device.
  case $kokkos in
    *OpenMP*|*Threads*) layouts=(2x1 1x2) ;;
    *Cuda*|*HIP*|*SYCL*) layouts=(1x1) ;;
    *) layouts=(2x1) ;;
  esac
  for layout in "${layouts[@]}"; do
    platforms+=("$(basename "$build")-$layout"$'\t'"$build"$'\t'"$banner"$'\t'"$kokkos"$'\t'"${layout%x*}"$'\t'"${layout#*x}")
  done
done

# Sets name, build, banner, kokkos, ranks, threads and bind for a platform,
# and its environment.
enter() {
  IFS=$'\t' read -r name build banner kokkos ranks threads <<<"$1"
  # One rank per core is bound to it; one threaded rank must be free to use
  # both cores. The vendor GEMM runs on the rank's Kokkos threads (output
  # columns split over them), so OpenBLAS keeps one thread: no second pool.
  bind=(--bind-to core)
  [[ $threads -gt 1 ]] && bind=(--bind-to none)
  # OMP_PROC_BIND, OMP_PLACES and OMP_WAIT_POLICY from the caller win (README.md, "Platforms").
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1
  export OMP_PROC_BIND=${caller_bind:-spread} OMP_PLACES=${caller_places:-threads}
}

# The roofline of each platform: every rank runs the GEMM and bandwidth
# kernels at the same time (report.py adds the ranks up).
for platform in "${platforms[@]}"; do
  enter "$platform"
  say "$name ($kokkos, $ranks rank(s) x $threads thread(s)): roofline"
  # shellcheck disable=SC2016 # $OMPI_COMM_WORLD_RANK is each rank's own, expanded there
  ROOF="$out/$name-roofline" mpirun -n "$ranks" "${bind[@]}" \
    sh -c '"$0" "$@" --benchmark_out="$ROOF-$OMPI_COMM_WORLD_RANK.json"' \
    "$build/benchmarks/kernels_benchmark" --benchmark_filter='BM_gemm_(vendor|packed)/1024/|BM_deep_copy|BM_add' \
    --benchmark_out_format=json "${roof_args[@]}" >/dev/null 2>"$out/$name-roofline.log" ||
    { cat "$out/$name-roofline.log" >&2; exit 1; }
done

# The decks, every platform in turn in each round. A threaded rank pays a
# cache line's trip between its threads' cores in every fork-join; on a VM
# that moves with the vCPUs, so it is measured before and after each round's
# decks (docs/performance-log.md, "Where the vCPUs are").
declare -A trips
for round in $(seq "$rounds"); do
  for platform in "${platforms[@]}"; do
    enter "$platform"
    say "$name, round $round of $rounds"
    [[ $threads -gt 1 ]] && trips[$name]+=" $(round_trip_ns "$build")"
    for deck in "${decks[@]}"; do
      run="$out/$name-$(basename "$deck" .toml)-round$round"
      mpirun -n "$ranks" "${bind[@]}" "$build/src/app/kpipe" run "$deck" "pipeline.stages=$ranks" \
        "train.steps=$steps" --json "$run.json" >"$run.log" 2>&1 ||
        say "$name: $(basename "$deck") failed in round $round (counts as unsupported; $run.log)"
    done
    [[ $threads -gt 1 ]] && trips[$name]+=" $(round_trip_ns "$build")"
  done
done

for platform in "${platforms[@]}"; do
  enter "$platform"
  # shellcheck disable=SC2086 # the round trips, one word each
  /usr/bin/python3 - "$out/$name.json" "$build" "$banner" "$kokkos" "$ranks" "$threads" "$rounds" ${trips[$name]:-} <<'EOF'
import json, os, sys
path, build, banner, kokkos, ranks, threads, rounds, *trips = sys.argv[1:]
env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES",
                                      "OMP_WAIT_POLICY")}
json.dump({"build": build, "banner": banner, "kokkos": kokkos, "ranks": int(ranks), "threads": int(threads),
           "rounds": int(rounds), "environment": env, "load_average_after": os.getloadavg(),
           "thread_round_trip_ns": [float(t) for t in trips]}, open(path, "w"), indent=2)
EOF
done
/usr/bin/python3 examples/portability/report.py "$out" "${decks[@]}"
