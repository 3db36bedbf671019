// main() for MPI tests: every rank runs the same Catch2 session, and the ranks
// agree on the verdict, so a failure on any rank fails the test on all ranks.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/tensor/compat.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kpipe::tensor::compat::initialize(argc, argv);
  int failures = Catch::Session().run(argc, argv);
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  Kokkos::finalize();
  MPI_Finalize();
  return any_failures;
}
