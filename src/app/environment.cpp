#include "environment.hpp"

#include <fmt/format.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kpipe/config/deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/kernels/compat.hpp"

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
  return fmt::format("Kokkos {} {} (concurrency {}), MPI {} rank{}", compat::kokkos_version(),
                     Kokkos::DefaultExecutionSpace::name(), compat::concurrency(), size_, size_ == 1 ? "" : "s");
}

void abort_job(const std::exception& error, int exit_code) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "kpipe: error: rank %d: %s\n", rank, error.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return
}

std::string read_deck_on_root(const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string payload;
  int failed = 0;
  if (rank == 0) {
    try {
      payload = config::read_deck_file(path);
    } catch (const Error& e) {
      payload = e.what();
      failed = 1;
    }
  }
  // One broadcast of {failed, length}, then the text or the error message.
  long long header[2] = {failed, static_cast<long long>(payload.size())};
  MPI_Bcast(header, 2, MPI_LONG_LONG, 0, comm);
  payload.resize(static_cast<std::size_t>(header[1]));
  MPI_Bcast(payload.data(), static_cast<int>(header[1]), MPI_CHAR, 0, comm);
  if (header[0] != 0) throw input_error(payload);
  return payload;
}

}  // namespace kpipe::app
