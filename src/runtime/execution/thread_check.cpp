#include "kpipe/runtime/execution/detail/thread_check.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::runtime {

namespace {

// A rank's threads as bytes of one size on every rank, for the all-gather:
// three ints, then one byte per CPU (CPU_SETSIZE of them).
constexpr std::size_t header_bytes = 3 * sizeof(int);
constexpr std::size_t record_bytes = header_bytes + CPU_SETSIZE;

std::vector<unsigned char> serialise(const RankThreads& rank) {
  std::vector<unsigned char> bytes(record_bytes, 0);
  const int header[3] = {rank.kokkos, rank.blas, rank.blas_pool ? 1 : 0};
  std::memcpy(bytes.data(), header, header_bytes);
  for (const int cpu : rank.cpus) bytes[header_bytes + static_cast<std::size_t>(cpu)] = 1;
  return bytes;
}

RankThreads parse(const unsigned char* bytes) {
  int header[3] = {};
  std::memcpy(header, bytes, header_bytes);
  RankThreads rank{header[0], header[1], header[2] != 0, {}};
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (bytes[header_bytes + static_cast<std::size_t>(cpu)]) rank.cpus.push_back(cpu);
  }
  return rank;
}

std::string plural(int n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); }

// The CPUs any thread of this process may run on. Not the calling thread's
// mask alone: OMP_PROC_BIND binds each OpenMP thread, the calling one
// included, to one place, so its mask is one CPU while the rank's threads
// together run on all of theirs.
std::set<int> process_cpus() {
  std::set<int> cpus;
  const auto add = [&](pid_t thread) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(thread, sizeof set, &set) != 0) return;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
    }
  };
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const std::string name = entry.path().filename().string();
    if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      add(static_cast<pid_t>(std::stol(name)));
    }
  }
  if (cpus.empty()) add(0);  // no /proc: this thread's mask
  return cpus;
}

}  // namespace

RankThreads this_rank_threads() {
  RankThreads rank;
  rank.kokkos = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  const kernels::BlasThreads blas = kernels::vendor_blas_threads();
  rank.blas = blas.threads;
  rank.blas_pool = blas.own_pool;
  const std::set<int> cpus = process_cpus();
  rank.cpus.assign(cpus.begin(), cpus.end());
  return rank;
}

std::string oversubscription_warning(const std::string& host, const std::vector<RankThreads>& ranks) {
  std::set<int> cpus;
  int busy = 0;
  const RankThreads* crowded = nullptr;  // a rank with more busy threads than CPUs of its own
  for (const RankThreads& rank : ranks) {
    cpus.insert(rank.cpus.begin(), rank.cpus.end());
    busy += rank.busy();
    if (!crowded && rank.busy() > static_cast<int>(rank.cpus.size())) crowded = &rank;
  }
  const int cores = static_cast<int>(cpus.size());
  if (cores == 0 || (busy <= cores && !crowded)) return "";
  const RankThreads& rank = crowded ? *crowded : ranks.front();
  const std::string threads =
      plural(rank.kokkos, "Kokkos thread") +
      (rank.blas_pool && rank.blas > 1 ? fmt::format(" and {} beside them", plural(rank.blas, "OpenBLAS thread"))
                                       : std::string());
  // The BLAS pool first (the threads that spin beside OpenMP's), then Kokkos' threads, then the ranks.
  const std::string what_to_set =
      rank.blas_pool && rank.blas > 1 ? std::string("set OPENBLAS_NUM_THREADS=1")
      : rank.kokkos > 1
          ? fmt::format("set OMP_NUM_THREADS={}", std::max<int>(1, cores / static_cast<int>(ranks.size())))
          : fmt::format("run at most {} there", plural(cores, "rank"));
  if (busy <= cores) {
    return fmt::format(
        "node {}: a rank runs {} ({} busy) on the {} it may use; bind it to more cores (mpirun "
        "--map-by slot:PE=N, srun --cpus-per-task=N) or {}; the run is slow, not wrong",
        host, threads, rank.busy(), plural(static_cast<int>(rank.cpus.size()), "core"), what_to_set);
  }
  return fmt::format("node {}: {} x {} = {} busy threads on {}; {}; the run is slow, not wrong", host,
                     plural(static_cast<int>(ranks.size()), "rank"), threads, busy, plural(cores, "core"), what_to_set);
}

void warn_if_oversubscribed(const comm::ProcessGrid& grid) {
  const int size = comm::size_of(grid.world());
  const std::vector<unsigned char> mine = serialise(this_rank_threads());
  std::vector<unsigned char> all(record_bytes * static_cast<std::size_t>(size));
  comm::all_gather(grid.world(), mine.data(), record_bytes, all.data());
  if (!log::is_root()) return;
  std::map<std::string, std::vector<RankThreads>> nodes;  // by host name, in name order
  for (int r = 0; r < size; ++r) {
    nodes[grid.hosts().at(static_cast<std::size_t>(r))].push_back(
        parse(all.data() + record_bytes * static_cast<std::size_t>(r)));
  }
  for (const auto& [host, ranks] : nodes) {
    const std::string warning = oversubscription_warning(host, ranks);
    if (warning.empty()) continue;
    log::warning("{}", warning);
    return;
  }
}

}  // namespace kpipe::runtime
