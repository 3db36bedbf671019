#pragma once
// train.distributed_optimizer (ZeRO stage 1: Rajbhandari et al. 2020;
// Megatron-LM's --use-distributed-optimizer). The replicas of a pipeline
// rank sum their gradients as without it, so each holds the same sum and the
// clip factor is the same bits; each then updates only its rows of every
// parameter (model::shard_rows), keeping the optimizer state of those rows
// alone, and the replicas all-gather the updated rows. The weights are
// bitwise those of every replica updating all of them (each element's update
// reads only that element), with 1/d of the optimizer state on each rank.
// The gradients are not reduce-scattered: a norm summed from shards would
// add in another order than the reference's, and the clip factor would
// differ in its last bits.

#include <cstdint>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/model/layer.hpp"

namespace kpipe::runtime {

template <class Scalar>
class ShardGather {
 public:
  // `parameters`: this rank's, in the optimizer's order; `replicas`: the
  // data-parallel group, whose rank r updated shard r. `stage_through_host`:
  // MPI cannot read the memory space's buffers (comm::mpi_reaches_device_memory).
  ShardGather(comm::Communicator replicas, std::vector<model::Parameter<Scalar>> parameters, bool stage_through_host,
              tensor::ExecContext& exec);

  // Every parameter's rows from the replica that updated them (collective over the replicas).
  void gather();
  // The whole of a state matrix of parameter `parameter` (its local shape)
  // from each replica's rows, `mine` being this rank's (collective): what a
  // checkpoint writes.
  tensor::Matrix<Scalar> whole(const tensor::ConstMatrix<Scalar>& mine, std::size_t parameter);
  // Bytes of parameters gathered so far, each whole parameter once per
  // gather, as the traffic prediction counts a collective's buffer.
  std::uint64_t bytes_gathered() const { return bytes_gathered_; }

 private:
  void gather_rows(const tensor::Matrix<Scalar>& matrix, std::size_t parameter);

  comm::Communicator replicas_;
  std::vector<model::Parameter<Scalar>> parameters_;
  bool stage_through_host_;
  tensor::ExecContext& exec_;
  // Per parameter: the first row of each replica's rows, then the row count.
  std::vector<std::vector<int>> first_;
  std::uint64_t bytes_gathered_ = 0;
};

}  // namespace kpipe::runtime
