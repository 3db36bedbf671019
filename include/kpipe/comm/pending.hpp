#pragma once
// Collectives started now and completed later, so that a rank computes while
// the others catch up (train.post_validation: each rank updates first and
// learns the global check afterwards). Each object owns the buffers MPI
// reads and writes until it completes; result() completes it under the
// collectives' watchdog (comm::watch_collectives), as the blocking ones do.

#include <vector>

#include "kpipe/comm/collectives.hpp"

namespace kpipe::comm {

// all_gather_varying(comm, mine, counts), started.
class PendingGather {
 public:
  PendingGather(Communicator comm, std::vector<double> mine, const std::vector<int>& counts);
  PendingGather(const PendingGather&) = delete;
  PendingGather& operator=(const PendingGather&) = delete;
  // Completes a gather still in flight: MPI must not write into freed buffers.
  ~PendingGather();

  // Every rank's values, rank after rank.
  const std::vector<double>& result();

 private:
  std::vector<double> mine_;
  std::vector<double> all_;
  std::vector<int> counts_, offsets_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// max(comm, mine), started.
class PendingMax {
 public:
  PendingMax(Communicator comm, double mine);
  PendingMax(const PendingMax&) = delete;
  PendingMax& operator=(const PendingMax&) = delete;
  ~PendingMax();

  double result();

 private:
  double mine_;
  double largest_ = 0.0;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace kpipe::comm
