#pragma once
// One parallel region whose iteration p runs on host thread p: the launcher
// for work that is divided among a rank's threads by owner (a stage's row
// parts, each layer's W on its thread, each gradient zeroed and updated
// where that W wrote it), so a thread meets the lines it wrote before.

#include <atomic>
#include <exception>

#include "kpipe/tensor/compat.hpp"

namespace kpipe::tensor {

// part(p) for p in [0, parts) on `space`'s host threads, iteration p on thread
// p (parts at most the space's concurrency), or one after the other where the
// space has one thread. The first exception a part throws is rethrown once
// every part has run (a part never leaves its region by throwing); nothing
// is allocated, as this runs for every F, B and W of a threaded stage.
template <class HostSpace, class Part>
void on_host_threads(const HostSpace& space, const char* label, int parts, const Part& part) {
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  const auto guarded = [&](int p) {
    try {
      part(p);
    } catch (...) {
      if (!failed.exchange(true)) failure = std::current_exception();
    }
  };
  if (compat::concurrency(space) == 1) {
    for (int p = 0; p < parts; ++p) guarded(p);
  } else {
    Kokkos::parallel_for(compat::kernel_label(label), Kokkos::RangePolicy<HostSpace>(space, 0, parts), guarded);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kpipe::tensor
