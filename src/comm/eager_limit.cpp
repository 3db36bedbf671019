#include "kpipe/comm/eager_limit.hpp"

#include <mpi.h>
#include <stdlib.h>  // setenv (POSIX)

#include <array>
#include <cstdlib>
#include <string>

namespace kpipe::comm {

namespace {

std::string& description() {
  static std::string set = "not set (before MPI_Init)";
  return set;
}

}  // namespace

void prefer_eager_shared_memory() {
#if defined(OPEN_MPI) && OPEN_MPI
  // Read by MPI_Init from this process' environment; mpirun passes its --mca
  // options to the ranks the same way, so a user's choice is seen here.
  constexpr std::array<const char*, 2> variables = {"OMPI_MCA_btl_vader_eager_limit", "OMPI_MCA_btl_sm_eager_limit"};
  for (const char* variable : variables) {
    if (const char* value = std::getenv(variable)) {
      description() = std::string(value) + " bytes (" + variable + " in the environment)";
      return;
    }
  }
  const std::string bytes = std::to_string(preferred_eager_bytes);
  for (const char* variable : variables) ::setenv(variable, bytes.c_str(), /*overwrite=*/0);
  description() = bytes + " bytes (kpipe's default; set OMPI_MCA_btl_vader_eager_limit to change it)";
#else
  description() = "the MPI library's own (kpipe sets it only for Open MPI)";
#endif
}

const std::string& shared_memory_eager_limit() { return description(); }

}  // namespace kpipe::comm
