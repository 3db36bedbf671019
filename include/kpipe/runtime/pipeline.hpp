#pragma once
// One rank's share of a pipelined run of a deck: its place in the process
// grid, the schedule, the model chunks it holds, their optimizer, the data it
// feeds, and the executor that runs a step. `kpipe run`, `kpipe infer` and the
// MPI tests all build this one object.

#include <memory>
#include <vector>

#include "kpipe/comm/gradient_reducer.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/comm/watchdog.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/model/optimizer.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/synthetic.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/runtime/executor.hpp"
#include "kpipe/schedule/from_deck.hpp"

namespace kpipe::runtime {

enum class Mode { train, infer };

// What a forward-only step measured at the last model stage.
struct Evaluation {
  double loss = 0.0;  // Σ scaled losses, as in training
  std::int64_t correct = 0;  // classification: samples whose argmax is the label
  std::int64_t samples = 0;
};

template <class Scalar>
class Pipeline {
 public:
  // Builds this rank's part; world size must be p · d (an input error otherwise).
  Pipeline(const config::Deck& deck, MPI_Comm world, Mode mode, comm::Staging staging = comm::Staging::automatic);

  // Runs step `step` of the schedule: training steps update the weights.
  StepResult run_step(int step);
  // Training: the global mean loss of the last step, the same on every rank.
  double global_loss(const StepResult& result) const;
  // Inference: the evaluation of the last step, summed over the whole world.
  Evaluation global_evaluation() const;

  const comm::ProcessGrid& grid() const { return grid_; }
  const schedule::Schedule& schedule() const { return schedule_; }
  const schedule::DeckPlan& plan() const { return plan_; }
  const model::TrainerSpec& spec() const { return spec_; }
  const comm::Transport<Scalar>& transport() const { return transport_; }
  // The model chunks of this rank: chunk c is model stage c · p + stage.
  const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks() const { return chunks_; }
  std::vector<model::Parameter<Scalar>> parameters() const;

 private:
  MicrobatchIO<Scalar> microbatch_io();
  StepHooks step_hooks();
  void reduce_gradients();
  void optimizer_step();
  // The squared norm of every gradient of the whole model, in global layer
  // order, so global-norm clipping adds them exactly as the reference does.
  std::vector<double> squared_norms_in_layer_order() const;
  double loss(int step, int mb, const Matrix<Scalar>& Y, const Matrix<Scalar>& dY);
  void evaluate(int step, int mb, const Matrix<Scalar>& Y);
  std::int64_t first_sample(int mb) const;

  model::TrainerSpec spec_;
  schedule::DeckPlan plan_;
  comm::ProcessGrid grid_;
  schedule::Schedule schedule_;
  comm::Watchdog watchdog_;
  comm::Transport<Scalar> transport_;
  comm::GradientReducer<Scalar> reducer_;
  tensor::ExecContext exec_;  // the instance and pool of every chunk, the data and the optimizer
  std::vector<std::unique_ptr<model::Stage<Scalar>>> chunks_;
  model::SyntheticData<Scalar> data_;
  model::Targets<Scalar> targets_;
  std::unique_ptr<model::Optimizer<Scalar>> optimizer_;
  Evaluation evaluation_;
  tensor::BufferPool<Matrix<Scalar>> scratch_{"kpipe::runtime::evaluation_scratch"};
  Executor<Scalar> executor_;
};

}  // namespace kpipe::runtime
