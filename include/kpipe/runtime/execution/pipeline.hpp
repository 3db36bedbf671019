#pragma once
// One rank's share of a pipelined run: its place in the process grid, the
// schedule, the model chunks it holds and their optimizer, wired to the
// pieces that each do one job — the data feed, the loss head, the gradient
// synchronisation — and to the executor that runs a step. `kpipe run`,
// `kpipe infer`, the benchmarks and the MPI tests all build this one object.

#include <memory>
#include <vector>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/comm/watchdog.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/traffic.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/data_feed.hpp"
#include "kpipe/runtime/execution/executor.hpp"
#include "kpipe/runtime/execution/gradient_sync.hpp"
#include "kpipe/runtime/execution/grid_collectives.hpp"
#include "kpipe/runtime/execution/held_out_evaluator.hpp"
#include "kpipe/runtime/execution/loss_head.hpp"
#include "kpipe/runtime/execution/optimizer_shards.hpp"
#include "kpipe/runtime/execution/step_update.hpp"
#include "kpipe/runtime/persistence/activation_dump.hpp"
#include "kpipe/runtime/persistence/activation_store.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/schedule/run_plan.hpp"

namespace kpipe::runtime {

enum class Mode { train, infer };

template <class Scalar>
class Pipeline {
 public:
  // Builds this rank's part; world size must be p · t · d (an input error otherwise).
  // Set-up may fail on one rank only: build it under comm::collectively over
  // `world` and the phase name "set-up" (the agreement inside meets a failing rank's).
  Pipeline(const config::RunConfig& config, comm::Communicator world, Mode mode,
           comm::Staging staging = comm::Staging::automatic);

  // Runs step `step` of the schedule: training steps update the weights
  // (StepUpdate). With train.on_nonfinite = "stop" a NaN or Inf loss on any
  // rank throws comm::AgreedError on every rank, and no weight changes.
  StepResult run_step(int step);
  // Training with train.post_validation: completes the last step's update
  // (rolled back and redone where its global check says so). Anything that
  // reads the weights between steps (checkpoints, evaluation, the end of a
  // run) calls it first; run_step does at its start. Nothing otherwise.
  void settle();

  const comm::ProcessGrid& grid() const { return grid_; }
  const schedule::Schedule& schedule() const { return schedule_; }
  const schedule::RunPlan& plan() const { return plan_; }
  // This rank's memory estimate, made before the model was allocated.
  const MemoryEstimate& memory() const { return memory_; }
  const model::TrainerSpec& spec() const { return spec_; }
  // Each model stage's predicted traffic per rank (model::stage_traffic).
  const std::vector<model::StageTraffic>& traffic() const { return traffic_; }
  const comm::Transport& transport() const { return transport_; }
  const GridCollectives& collectives() const { return collectives_; }
  const GradientSync<Scalar>& gradient_sync() const { return gradient_sync_; }
  // Training: the step's update and its checks (skipped and redone updates); null in inference.
  const StepUpdate<Scalar>* update() const { return update_.get(); }
  StepUpdate<Scalar>* update() { return update_.get(); }
  // Training with train.eval_every: this rank's evaluation of the first
  // train.eval_batches validation batches with the current weights (see
  // global_evaluation). Only with train.eval_every > 0. Its boundary
  // messages and tensor-group sums are counted in validation_bytes(), apart
  // from the training steps' that kpipe plan predicts.
  Evaluation validate();
  struct ValidationBytes {
    std::uint64_t pipeline = 0;  // boundary messages sent
    std::uint64_t tensor = 0;    // tensor-group collectives and boundary all-gathers
  };
  const ValidationBytes& validation_bytes() const { return validation_bytes_; }
  // Inference: this rank's evaluation of the last step (see global_evaluation).
  const Evaluation& evaluation() const { return loss_head_.evaluation(); }
  // The model chunks of this rank: chunk c is the model stage
  // schedule().placement.stage(rank, c). Only a pipeline that may change
  // hands out a chunk that may.
  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  const model::Stage<Scalar>& chunk(int c) const { return *chunks_.at(static_cast<std::size_t>(c)); }
  model::Stage<Scalar>& chunk(int c) { return *chunks_.at(static_cast<std::size_t>(c)); }
  std::vector<model::Parameter<Scalar>> parameters() const;
  // The optimizer of this rank's parameters; null in inference. Checkpoints
  // save and restore its state and step count.
  const model::Optimizer<Scalar>* optimizer() const { return optimizer_.get(); }
  model::Optimizer<Scalar>* optimizer() { return optimizer_.get(); }
  // train.distributed_optimizer: the all-gather of the rows each replica
  // updated, which a checkpoint also gathers the optimizer state with; null
  // without it.
  ShardGather<Scalar>* shard_gather() const { return shard_gather_.get(); }
  const comm::Watchdog& watchdog() const { return watchdog_; }
  // The microbatches this rank runs at once (pipeline.lanes; Executor::lanes).
  int lanes() const { return executor_.lanes(); }
  // Lanes split by layers (pipeline.lane_split): the microbatches of a group
  // (0: none run), whether each step's split is chosen by timing, and the
  // steps that ran split by layers (Executor).
  int layer_lanes() const { return executor_.layer_lanes(); }
  bool times_lane_split() const { return executor_.times_lane_split(); }
  int steps_split_by_layers() const { return executor_.steps_split_by_layers(); }
  // pipeline.overlap_grad_reduce: data-parallel sums start inside the last backward.
  bool overlaps_gradient_sums() const { return overlap_gradient_sums_; }
  // pipeline.activation_store = "hdf5" in training: this rank's store; null otherwise.
  const Hdf5ActivationStore* activation_store() const { return activation_store_.get(); }
  // debug.dump_steps set: this rank's activation dump; null otherwise.
  const ActivationDump* activation_dump() const { return dump_.get(); }
  // Samples in one pass over the data (training: the train split, inference:
  // the test split); 0 for synthetic data.
  std::int64_t data_samples() const { return feed_.samples(); }

 private:
  MicrobatchIO<Scalar> microbatch_io();
  StepHooks step_hooks();

  model::TrainerSpec spec_;  // the model and its partition, computed once
  std::vector<model::StageTraffic> traffic_;
  schedule::RunPlan plan_;
  comm::ProcessGrid grid_;
  schedule::Schedule schedule_;
  bool overlap_gradient_sums_;
  comm::Watchdog watchdog_;
  MemoryEstimate memory_;  // checked against the limit before anything below is allocated
  // The instance and pool of every chunk, the data, the loss, the optimizer and the transport's sends.
  tensor::ExecContext exec_;
  GridCollectives collectives_;  // the chunks' tensor-parallel group
  comm::Transport transport_;
  std::unique_ptr<Hdf5ActivationStore> activation_store_;  // before the chunks, which use it
  std::unique_ptr<model::Documents> documents_;            // packed documents only; the chunks' layers read it
  std::vector<std::unique_ptr<model::Stage<Scalar>>> chunks_;
  DataFeed<Scalar> feed_;
  LossHead<Scalar> loss_head_;
  // Every rank built the parts above, each of which may fail on one rank
  // alone, before the communicator splits of the gradient sums.
  comm::AgreementPoint parts_built_;
  GradientSync<Scalar> gradient_sync_;
  std::unique_ptr<model::Optimizer<Scalar>> optimizer_;  // training only
  std::unique_ptr<ShardGather<Scalar>> shard_gather_;    // train.distributed_optimizer only
  std::unique_ptr<StepUpdate<Scalar>> update_;           // training only
  std::unique_ptr<ActivationDump> dump_;                 // debug.dump_steps only; before the executor that feeds it
  Executor<Scalar> executor_;
  std::unique_ptr<HeldOutEvaluator<Scalar>> held_out_;  // training with train.eval_every only
  int step_ = 0;                                        // the step in flight, for messages
  ValidationBytes validation_bytes_;
};

// Whether this rank's losses count in a global sum: the last stage's t
// tensor ranks each compute the whole loss, and one of them counts.
bool counts_loss(const comm::ProcessGrid& grid);
// Training: the global mean loss of a step, the same on every rank.
double global_loss(const comm::ProcessGrid& grid, const StepResult& result);
// Inference: a step's evaluation summed over the whole world.
Evaluation global_evaluation(const comm::ProcessGrid& grid, const Evaluation& mine);

}  // namespace kpipe::runtime
