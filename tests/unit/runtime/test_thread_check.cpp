#include "kpipe/runtime/execution/detail/thread_check.hpp"

#include <sched.h>

#include <condition_variable>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/isolated.hpp"

using namespace kpipe;
using Catch::Matchers::Contains;
using runtime::RankThreads;

namespace {

// A rank with `kokkos` threads, `blas` OpenBLAS threads (a pool of their own
// or not) that may run on CPUs [first, first + count).
RankThreads rank(int kokkos, int blas, bool pool, int first, int count) {
  std::vector<int> cpus(static_cast<std::size_t>(count));
  std::iota(cpus.begin(), cpus.end(), first);
  return {kokkos, blas, pool, cpus};
}

}  // namespace

TEST_CASE("ranks that have a core per busy thread are not warned about", "[runtime][threads]") {
  CHECK(runtime::oversubscription_warning("n", {rank(1, 1, true, 0, 2), rank(1, 1, true, 0, 2)}).empty());
  CHECK(runtime::oversubscription_warning("n", {rank(1, 1, true, 0, 1), rank(1, 1, true, 1, 1)}).empty());
  // OpenMP threads with OpenBLAS on them: one pool, the larger of the two.
  CHECK(runtime::oversubscription_warning("n", {rank(4, 4, false, 0, 4), rank(4, 4, false, 4, 4)}).empty());
  CHECK(runtime::oversubscription_warning("n", {rank(1, 8, true, 0, 8)}).empty());
}

TEST_CASE("oversubscribed nodes get one line saying what to set", "[runtime][threads]") {
  // More ranks than cores.
  CHECK(runtime::oversubscription_warning(
            "n", {rank(1, 1, true, 0, 2), rank(1, 1, true, 0, 2), rank(1, 1, true, 0, 2), rank(1, 1, true, 0, 2)}) ==
        "node n: 4 ranks x 1 Kokkos thread = 4 busy threads on 2 cores; run at most 2 ranks there; the run is slow, "
        "not wrong");
  // OpenBLAS' pthreads pool beside Kokkos' OpenMP threads: 2 + 2 - 1 busy threads a rank.
  CHECK(runtime::oversubscription_warning("n", {rank(2, 2, true, 0, 4), rank(2, 2, true, 0, 4)}) ==
        "node n: 2 ranks x 2 Kokkos threads and 2 OpenBLAS threads beside them = 6 busy threads on 4 cores; set "
        "OPENBLAS_NUM_THREADS=1; the run is slow, not wrong");
  // OpenMP's default of a thread per core in every rank.
  CHECK_THAT(runtime::oversubscription_warning("n", {rank(4, 1, true, 0, 4), rank(4, 1, true, 0, 4)}),
             Contains("2 ranks x 4 Kokkos threads = 8 busy threads on 4 cores; set OMP_NUM_THREADS=2"));
  // A rank bound to one core that runs two threads, though the node has room.
  CHECK_THAT(runtime::oversubscription_warning("n", {rank(2, 1, false, 0, 1), rank(1, 1, false, 1, 3)}),
             Contains("node n: a rank runs 2 Kokkos threads (2 busy) on the 1 core it may use; bind it to more cores"));
}

TEST_CASE("a rank's CPUs are those of all its threads, not the calling thread's alone", "[runtime][threads]") {
  // As OMP_PROC_BIND leaves an OpenMP rank: the calling thread bound to one
  // CPU, another thread to the next one. In a child process, whose only
  // threads are these two: a CUDA build's driver threads, started unbound
  // before the test, would add every CPU to the parent's set.
  cpu_set_t all;
  CPU_ZERO(&all);
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) allowed.push_back(cpu);
  }
  if (allowed.size() < 2) {
    WARN("one CPU: there are no two CPUs to bind two threads apart");
    return;
  }
  const auto two_threads_apart = [&] {
    const auto bind = [](int cpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      return sched_setaffinity(0, sizeof one, &one) == 0;
    };
    std::mutex mutex;
    std::condition_variable changed;
    bool bound = false, done = false;
    std::thread other([&] {
      std::unique_lock<std::mutex> lock(mutex);
      bound = bind(allowed[1]);
      changed.notify_all();
      changed.wait(lock, [&] { return done; });
    });
    std::vector<int> cpus;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return bound; });
      if (!bind(allowed[0])) throw std::runtime_error("could not bind the calling thread");
      cpus = runtime::this_rank_threads().cpus;
      done = true;
    }
    changed.notify_all();
    other.join();
    const std::vector<int> expected{allowed[0], allowed[1]};
    if (cpus != expected) {
      std::string listed;
      for (const int cpu : cpus) listed += " " + std::to_string(cpu);
      throw std::runtime_error("the rank's CPUs are" + listed + ", not " + std::to_string(expected[0]) + " " +
                               std::to_string(expected[1]));
    }
  };
  const IsolatedOutcome outcome = run_isolated(two_threads_apart, 30.0);
  INFO(outcome.message);
  CHECK(outcome.end == IsolatedOutcome::End::finished);
}
