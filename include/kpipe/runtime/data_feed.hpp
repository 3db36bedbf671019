#pragma once
// Where a replica's microbatches come from: the inputs of the first model
// stage and the targets of the last, for (step, microbatch). Replica r of d
// trains on samples [r·B/d, (r+1)·B/d) of every step, the same samples the
// sequential reference gives it, which the bitwise tests rest on.

#include <cstdint>

#include "kpipe/model/loss.hpp"
#include "kpipe/model/synthetic.hpp"
#include "kpipe/model/trainer.hpp"

namespace kpipe::runtime {

template <class Scalar>
class DataFeed {
 public:
  DataFeed(const model::TrainerSpec& spec, int replica, tensor::ExecContext& exec);

  void inputs(int step, int mb, const tensor::Matrix<Scalar>& X) const;
  // The targets of microbatch mb, valid until the next call.
  const model::Targets<Scalar>& targets(int step, int mb);

 private:
  std::int64_t first_sample(int mb) const;

  std::int64_t replica_offset_;
  int microbatch_size_;
  model::SyntheticData<Scalar> data_;
  model::Targets<Scalar> targets_;
};

}  // namespace kpipe::runtime
