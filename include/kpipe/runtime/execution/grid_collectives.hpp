#pragma once
// model::Collectives over the process grid's communicators: what layers call
// to talk to their tensor-parallel group (and their data-parallel replicas).
// A sum is deterministic and the same on every rank: each rank gathers every
// rank's buffer and adds them in rank order (an MPI reduction may order the
// additions differently on different ranks, or between runs). Buffers are
// staged through the host: the groups exchange a few rows per call.

#include <cstdint>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/model/collectives.hpp"

namespace kpipe::runtime {

class GridCollectives final : public model::Collectives {
 public:
  // `grid` and `exec` must outlive it.
  GridCollectives(const comm::ProcessGrid& grid, tensor::ExecContext& exec) : grid_(grid), exec_(exec) {}

  int size(model::Group group) const override;
  int rank(model::Group group) const override;
  void all_reduce_sum(model::Group group, const tensor::Tensor& buffer) override;
  void all_gather(model::Group group, const tensor::Tensor& local, const tensor::Tensor& gathered) override;
  void reduce_scatter_sum(model::Group group, const tensor::Tensor& whole, const tensor::Tensor& local) override;

  // Bytes this rank contributed to the collectives of groups of more than one
  // rank (its buffer once per call), and how many calls.
  std::uint64_t bytes_contributed() const { return bytes_contributed_; }
  std::uint64_t collectives() const { return collectives_; }

 private:
  void count(const tensor::Tensor& contribution);

  comm::Communicator communicator(model::Group group) const;

  // Every rank's bytes of `local` into gathered_, through sent_ where MPI
  // cannot read the tensor's memory.
  void gather_to_host(model::Group group, const tensor::Tensor& local);

  const comm::ProcessGrid& grid_;
  tensor::ExecContext& exec_;
  // Host buffers kept between calls: the layers call these every microbatch.
  std::vector<unsigned char> sent_, gathered_;
  std::uint64_t bytes_contributed_ = 0;
  std::uint64_t collectives_ = 0;
};

}  // namespace kpipe::runtime
