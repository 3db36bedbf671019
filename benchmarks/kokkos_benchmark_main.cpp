// main() for Google Benchmark executables that run Kokkos kernels. Write JSON
// with --benchmark_format=json or --benchmark_out=FILE --benchmark_out_format=json.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include "kpipe/tensor/compat.hpp"

int main(int argc, char** argv) {
  kpipe::tensor::compat::initialize(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Kokkos::finalize();
  return 0;
}
