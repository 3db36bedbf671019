#pragma once
// Whether the ranks of a node ask for more threads than it gives them cores
// (issue 27): Kokkos' host threads (OpenMP; one for Serial) and the BLAS'
// own pool (OpenBLAS' pthreads build, which spins beside OpenMP's threads)
// against the CPUs each rank may run on (its affinity, as mpirun or Slurm
// bound it) and the CPUs the node's ranks may run on together. Such a run
// is slow, not wrong: kpipe says so once, in one line, with what to set.

#include <algorithm>
#include <string>
#include <vector>

#include "kpipe/comm/process_grid.hpp"

namespace kpipe::runtime {

struct RankThreads {
  int kokkos = 1;          // Kokkos' host concurrency
  int blas = 1;            // the BLAS' own threads
  bool blas_pool = false;  // ... a pool beside Kokkos' threads (OpenBLAS pthreads)
  std::vector<int> cpus;   // the CPUs this rank's threads may run on, together

  // Threads the rank keeps busy: Kokkos' and the BLAS pool's beside them
  // (the calling thread is one of both), or the larger of the two when the
  // BLAS runs on the caller's threads.
  int busy() const { return blas_pool ? kokkos + blas - 1 : std::max(kokkos, blas); }
};

// This process: Kokkos' concurrency, kernels::vendor_blas_threads(), and the
// union of its threads' affinities (sched_getaffinity of each).
RankThreads this_rank_threads();

// The warning for the ranks of node `host` (without "kpipe: warning: "),
// or "" when every rank has a core per busy thread and so has the node.
std::string oversubscription_warning(const std::string& host, const std::vector<RankThreads>& ranks);

// Collective over the grid's world: every rank's threads gathered; world
// rank 0 prints the first node's warning, once.
void warn_if_oversubscribed(const comm::ProcessGrid& grid);

}  // namespace kpipe::runtime
