// main() for unit tests that run Kokkos kernels on one process.
#define CATCH_CONFIG_RUNNER
#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/tensor/compat.hpp"
#include "skip.hpp"

int main(int argc, char** argv) {
  kpipe::tensor::compat::initialize(argc, argv);
  const int failures = Catch::Session().run(argc, argv);
  Kokkos::finalize();
  return kpipe::test::exit_code(failures);
}
