#include "kpipe/comm/pending.hpp"

#include <numeric>

namespace kpipe::comm {

PendingGather::PendingGather(Communicator comm, std::vector<double> mine, const std::vector<int>& counts)
    : mine_(std::move(mine)), counts_(counts), offsets_(counts.size(), 0) {
  std::partial_sum(counts_.begin(), counts_.end() - 1, offsets_.begin() + 1);
  all_.resize(static_cast<std::size_t>(offsets_.back() + counts_.back()));
  MPI_Iallgatherv(mine_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, all_.data(), counts_.data(),
                  offsets_.data(), MPI_DOUBLE, comm, &request_);
}

PendingGather::~PendingGather() {
  if (request_ != MPI_REQUEST_NULL) complete_collective(request_, "a gather");
}

const std::vector<double>& PendingGather::result() {
  if (request_ != MPI_REQUEST_NULL) complete_collective(request_, "a gather");
  return all_;
}

PendingMax::PendingMax(Communicator comm, double mine) : mine_(mine) {
  MPI_Iallreduce(&mine_, &largest_, 1, MPI_DOUBLE, MPI_MAX, comm, &request_);
}

PendingMax::~PendingMax() {
  if (request_ != MPI_REQUEST_NULL) complete_collective(request_, "a maximum");
}

double PendingMax::result() {
  if (request_ != MPI_REQUEST_NULL) complete_collective(request_, "a maximum");
  return largest_;
}

}  // namespace kpipe::comm
