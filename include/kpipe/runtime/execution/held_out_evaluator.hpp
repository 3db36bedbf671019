#pragma once
// The validation loss of a training run (train.eval_every): forward passes
// over the held-out split on the chunks the rank trains, with a forward-only
// schedule on the training schedule's placement (schedule::forward_schedule),
// its own data feed and loss head, and the training run's transport. It runs
// between training steps, so the two never have messages in flight at once.

#include <memory>
#include <vector>

#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/data/data_feed.hpp"
#include "kpipe/runtime/execution/executor.hpp"
#include "kpipe/runtime/execution/loss_head.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

template <class Scalar>
class HeldOutEvaluator {
 public:
  // `documents`: what the chunks' layers read packed documents from (nullptr: none).
  HeldOutEvaluator(const config::RunConfig& config, const model::TrainerSpec& spec, const schedule::Schedule& training,
                   const comm::ProcessGrid& grid, std::vector<model::Stage<Scalar>*> chunks,
                   model::Documents* documents, comm::Transport& transport, model::Collectives& collectives,
                   tensor::ExecContext& exec);

  // Evaluates the first train.eval_batches batches of the validation split
  // (all of it when that is 0 or more than it holds); this rank's share, to
  // be summed with global_evaluation. Weights do not change.
  Evaluation evaluate();

 private:
  schedule::Schedule schedule_;
  DataFeed<Scalar> feed_;
  LossHead<Scalar> head_;
  Executor<Scalar> executor_;
  int batches_;  // evaluated per call
};

}  // namespace kpipe::runtime
