#pragma once
// The host-staging settings a comm test can exercise on this build: direct
// (MPI reads the Views' memory) and staged through host buffers, or staged
// alone where MPI cannot read device memory (CUDA without a CUDA-aware MPI),
// which a direct call would hand a device pointer.
#include <vector>

#include "kpipe/comm/transport.hpp"

namespace kpipe::test {

inline std::vector<bool> staging_choices() {
  if (comm::mpi_reaches_device_memory()) return {false, true};
  return {true};
}

}  // namespace kpipe::test
