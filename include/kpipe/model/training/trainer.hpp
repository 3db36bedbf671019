#pragma once
// The sequential trainer: the numerical reference of every pipelined run. On
// one rank it runs the model stages back to back over the same microbatches a
// pipeline would see, accumulates weight gradients in ascending microbatch
// order, sums data-parallel replicas in replica order and takes the same
// optimizer step. A pipelined run with any schedule and partition must give
// bitwise its weights (DESIGN.md §3).

#include <cstdint>
#include <memory>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/data/synthetic.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/loss_scaler.hpp"
#include "kpipe/model/training/optimizer.hpp"

namespace kpipe::model {

// The deck's compute.gemm, compute.attention and compute.precision in the
// kernels' own enums: the one translation (src/model/kernel_choices.hpp).
KernelChoice kernel_choice(const config::ComputeConfig& compute);

struct TrainerSpec {
  ModelSpec model;
  DataSpec data;
  OptimizerSpec optimizer;
  int global_batch = 1;            // B
  int microbatch_size = 1;         // b
  int data_parallel = 1;           // d: replica r trains on samples [r B/d, (r+1) B/d) of each step
  int document_separator = -1;     // data.pack_documents: the token closing each document; -1: none
  std::vector<LayerRange> stages;  // the partition into p * v stages; empty means one stage
  StageOptions stage;
  // pipeline.lanes: the microbatches a rank that holds the whole model runs
  // at once, one per host thread (schedule/lanes.hpp); 0 decides by the
  // stage (runtime::Executor).
  int lanes = 0;
  config::LaneSplit lane_split = config::LaneSplit::automatic;  // pipeline.lane_split
  // The most of a step's `microbatches` a rank's lanes may hold at once: one
  // on a device, else the larger of its groups split by microbatches (lanes
  // or, where the stage decides, one per host thread) and, where they may
  // run, by layers (layer_split_lanes).
  int most_lanes(int microbatches) const;

  // The sequential reference of a run configuration.
  static TrainerSpec from_config(const config::RunConfig& config);
};

template <class Scalar>
class SequentialTrainer {
 public:
  // `exec` must outlive the trainer: every kernel runs on its instance and
  // every per-step temporary comes from its pool, so steps after the first
  // allocate nothing.
  SequentialTrainer(const TrainerSpec& spec, tensor::ExecContext& exec);
  // The same on the samples of `data` (an HDF5 dataset: runtime::make_data_source).
  SequentialTrainer(const TrainerSpec& spec, tensor::ExecContext& exec, std::unique_ptr<DataSource<Scalar>> data);

  // One optimizer step on the next global batch; returns its mean loss. A NaN
  // or Inf loss throws a runtime error naming step and microbatch before the
  // optimizer runs, so the weights stay those of the last good step; with
  // train.on_nonfinite = "skip" a NaN or Inf loss or gradient norm skips the
  // update instead. fp16 (spec.optimizer.loss_scale): the loss gradients
  // carry the loss scale, and a NaN or Inf is an overflow that skips the
  // update and lowers the scale (stopping or skipping as above only where
  // the scale cannot be lowered).
  double step();
  // Steps done (updated or skipped); also the data step index s of the next step.
  std::int64_t steps_done() const { return steps_; }
  // Steps whose update train.on_nonfinite = "skip" or an fp16 overflow skipped.
  std::int64_t skipped_steps() const { return skipped_; }
  // The loss scale of the next step (1 but in fp16).
  double loss_scale() const { return scaler_.scale(); }

  std::vector<Stage<Scalar>>& stages() { return stages_; }
  // Every parameter, in global layer order.
  std::vector<Parameter<Scalar>> parameters() const;
  // All weights flattened on the host, for bitwise comparison.
  std::vector<Scalar> weights() const { return parameters_to_host(parameters()); }

 private:
  double run_replica(int replica);

  TrainerSpec spec_;
  tensor::ExecContext& exec_;
  std::unique_ptr<Documents> documents_;  // packed documents only; the stages' layers read it
  std::vector<Stage<Scalar>> stages_;
  std::unique_ptr<DataSource<Scalar>> data_;
  Optimizer<Scalar> optimizer_;
  LossScaler scaler_;
  Targets<Scalar> targets_;                          // of one microbatch, refilled for each
  std::vector<tensor::Matrix<Scalar>> replica_sum_;  // d > 1: sum of the replicas' gradients
  std::int64_t steps_ = 0;
  std::int64_t skipped_ = 0;
};

}  // namespace kpipe::model
