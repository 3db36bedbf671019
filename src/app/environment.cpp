#include "environment.hpp"

#include <fmt/format.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::app {

Environment::Environment(int& argc, char**& argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  log::set_rank(rank_);
  // Kokkos 3 also reads un-prefixed flags such as --help and --threads; give
  // it only its --kokkos-* ones, the rest belong to kpipe's command line.
  std::vector<char*> kokkos_args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).rfind("--kokkos-", 0) == 0) kokkos_args.push_back(argv[i]);
  }
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  kokkos_args.push_back(nullptr);
  Kokkos::initialize(kokkos_argc, kokkos_args.data());
}

Environment::~Environment() {
  Kokkos::finalize();
  MPI_Finalize();
}

std::string Environment::describe() const {
  return fmt::format("Kokkos {} {} (concurrency {}), MPI {} rank{}", tensor::compat::kokkos_version(),
                     Kokkos::DefaultExecutionSpace::name(), tensor::compat::concurrency(), size_, size_ == 1 ? "" : "s");
}

void abort_job(const std::exception& error, int exit_code) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "kpipe: error: rank %d: %s\n", rank, error.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return
}

}  // namespace kpipe::app
