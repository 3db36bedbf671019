// The launcher of work divided among a rank's host threads by owner: every
// part runs once, part p on thread p, and a part's exception reaches the
// caller only after every part has run.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include "kpipe/tensor/host_threads.hpp"

#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

using namespace kpipe;

TEST_CASE("on_host_threads runs part p once, on host thread p", "[tensor][host_threads]") {
  const Kokkos::DefaultHostExecutionSpace space;
  const int parts = tensor::compat::concurrency(space);
  std::vector<int> runs(static_cast<std::size_t>(parts), 0), thread(static_cast<std::size_t>(parts), -1);
  tensor::on_host_threads(space, "test::host_threads", parts, [&](int p) {
    ++runs[p];
#if defined(KOKKOS_ENABLE_OPENMP)
    thread[p] = parts > 1 ? omp_get_thread_num() : 0;
#else
    thread[p] = parts > 1 ? -2 : 0;  // no thread number to ask for: left out below
#endif
  });
  for (int p = 0; p < parts; ++p) {
    CHECK(runs[p] == 1);
    if (thread[p] != -2) CHECK(thread[p] == p);
  }
}

TEST_CASE("on_host_threads rethrows a part's exception once every part has run", "[tensor][host_threads]") {
  const Kokkos::DefaultHostExecutionSpace space;
  const int parts = std::max(2, tensor::compat::concurrency(space));
  std::vector<int> runs(static_cast<std::size_t>(parts), 0);
  const auto launch = [&] {
    tensor::on_host_threads(space, "test::host_threads_throw", parts, [&](int p) {
      ++runs[p];
      if (p == 0) throw std::runtime_error("part 0 failed");
    });
  };
  CHECK_THROWS_WITH(launch(), "part 0 failed");
  for (int p = 0; p < parts; ++p) CHECK(runs[p] == 1);
}
