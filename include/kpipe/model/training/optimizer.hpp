#pragma once
// The optimizer step over a list of parameters, and global-norm gradient
// clipping. State lives per parameter matrix, so checkpoints can store it by
// name next to the weights.

#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/kernels/optimizer.hpp"
#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// The optimizer a run asks for: train.* of the typed run configuration.
using config::OptimizerKind;
using OptimizerSpec = config::OptimizerConfig;

// The learning rate of update number `step` (from 0): linear warm-up over
// train.warmup_steps from lr / warmup_steps to lr, then lr (constant) or a
// cosine decay that reaches 0 at train.steps.
double learning_rate(const OptimizerSpec& spec, int step);

// train.distributed_optimizer (ZeRO stage 1): replica `index` of `count`
// keeps the state of, and updates, its rows of each parameter (shard_rows);
// the replicas then all-gather the rows (runtime/execution/optimizer_shards.hpp).
struct OptimizerShard {
  int index = 0;
  int count = 1;
};

// The rows of each of `parameters` that each of `count` replicas updates:
// the parameters' elements, flattened in order, cut into `count` nearly
// equal runs at row boundaries (a run may hold no row of a parameter).
// result[r][i]: replica r's rows of parameter i.
template <class Scalar>
std::vector<std::vector<RowRange>> shard_rows(const std::vector<Parameter<Scalar>>& parameters, int count);

// Weight decay (decoupled in AdamW, an L2 term in SGD) applies only to the
// parameters marked `decays`: weight matrices and embeddings, not biases or
// normalisation scales, as in GPT-2 and nanoGPT.
template <class Scalar>
class Optimizer {
 public:
  // Allocates all state here, once; step() allocates nothing. With a shard,
  // only its rows of each parameter: step() updates those and leaves the
  // others as they are, each element bitwise as the whole update makes it.
  Optimizer(const OptimizerSpec& spec, std::vector<Parameter<Scalar>> parameters, tensor::ExecContext& exec,
            OptimizerShard shard = {});

  // One update of every parameter from its gradient read times `grad_scale`
  // (clip_factor's, 1 when unclipped); the gradients stay as they are.
  void step(double grad_scale = 1.0);
  // From now on each step() first keeps the parameters, the state and the
  // update count as they were, so that roll_back() undoes it exactly
  // (train.post_validation). Allocates that copy here, once.
  void keep_previous();
  // Restores what the last step() changed; keep_previous() must have been called before it.
  void roll_back();
  // Updates done so far (AdamW's bias correction counts them); a restart sets it.
  int steps() const { return steps_; }
  void set_steps(int steps) { steps_ = steps; }

  // The state matrices, named "<parameter>.momentum_buffer" (SGD) or
  // "<parameter>.exp_avg" and "<parameter>.exp_avg_sq" (AdamW), as in
  // PyTorch; each is the same shard of its global tensor as its parameter,
  // and of that the rows `rows` of its `parameter_rows` (all of them
  // without an optimizer shard).
  struct State {
    std::string name;
    tensor::Matrix<Scalar> value;
    Shard shard = Shard::whole();
    bool tied_copy = false;  // of a tied copy's parameter: its owner's state holds the same
    RowRange rows;
    int parameter_rows = 0;
    std::size_t parameter = 0;  // its index in the optimizer's parameters
  };
  std::vector<State> state() const;

 private:
  OptimizerSpec spec_;
  tensor::ExecContext& exec_;
  std::vector<Parameter<Scalar>> parameters_;
  std::vector<RowRange> rows_;  // this shard's rows of each parameter
  // Each parameter's rows with their state (first: SGD's momentum buffer or AdamW's
  // exp_avg; second: AdamW's exp_avg_sq), as the update kernels take them.
  std::vector<kernels::ParameterUpdate<Scalar>> updates_;
  int steps_ = 0;
  // keep_previous(): what a step changes (each parameter's value and state),
  // and previous_[k], updated_[k] as it was before the last step.
  std::vector<tensor::Matrix<Scalar>> updated_;
  std::vector<tensor::Matrix<Scalar>> previous_;
  int previous_steps_ = 0;
};

// The squared L2 norm of every gradient, one entry per parameter (a tied
// copy's is zero: its matrix counts once, as its owner). Ranks that hold
// different stages exchange these lists, not partial sums, so that every rank
// adds the same numbers in the same order.
template <class Scalar>
std::vector<double> gradient_squared_norms(const tensor::ExecContext& exec,
                                           const std::vector<Parameter<Scalar>>& parameters);

// Where `parameters` hold both a tied matrix's owner and its copy (one rank
// holds the first and the last stage): both gradients become owner + copy,
// what the sum across two ranks gives (a + b == b + a). Returns whether any
// tied parameter is left for another rank to sum with.
template <class Scalar>
bool sum_tied_gradients(const tensor::ExecContext& exec, const std::vector<Parameter<Scalar>>& parameters);

// The square root of the squared norms added in the order given.
double global_norm(const std::vector<double>& squared_norms);

// Whether a step needs the global gradient norm: to clip (train.grad_clip),
// or to skip a step whose norm is NaN or Inf (train.on_nonfinite = "skip",
// and every fp16 overflow: train.loss_scale).
// Only then can a check change an update, so only then does
// train.post_validation keep a copy to roll back to.
bool needs_gradient_norm(const OptimizerSpec& spec);

// torch.nn.utils.clip_grad_norm_'s factor: max_norm / (norm + 1e-6) when
// norm > max_norm > 0 (NaN when the norm is), else 1.
double clip_factor(double norm, double max_norm);

// What Optimizer::step reads every gradient times: the clip factor of the
// unscaled gradients' norm, divided by the fp16 loss scale the gradients
// carry (model/training/loss_scaler.hpp). `norm` is the scaled gradients'; with a
// power-of-two scale both divisions are exact, so a scale of 1 and any other
// give the same factor for the same unscaled gradients.
double gradient_factor(double norm, double max_norm, double loss_scale);

}  // namespace kpipe::model
