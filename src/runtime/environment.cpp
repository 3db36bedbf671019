#include "kpipe/runtime/environment.hpp"

#include <fmt/format.h>

#include <Kokkos_Core.hpp>

#include <string_view>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::runtime {

Environment::Environment(int& argc, char**& argv) : mpi_(argc, argv) {
  log::set_rank(mpi_.rank());
  // Kokkos 3 also reads un-prefixed flags such as --help and --threads; give
  // it only its --kokkos-* ones, the rest belong to kpipe's command line.
  // Kokkos' warnings stay off stderr, which kpipe owns (compat::initialize).
  std::vector<char*> kokkos_args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).rfind("--kokkos-", 0) == 0) kokkos_args.push_back(argv[i]);
  }
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  kokkos_args.push_back(nullptr);
  tensor::compat::initialize(kokkos_argc, kokkos_args.data());
}

Environment::~Environment() { Kokkos::finalize(); }

std::string Environment::describe() const {
  return fmt::format("Kokkos {} {} (concurrency {}), MPI {} rank{}", tensor::compat::kokkos_version(),
                     Kokkos::DefaultExecutionSpace::name(), tensor::compat::concurrency(), size(),
                     size() == 1 ? "" : "s");
}

}  // namespace kpipe::runtime
