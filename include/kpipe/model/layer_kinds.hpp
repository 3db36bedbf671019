#pragma once
// The kinds of layer kpipe builds models from: Linear, activations,
// LayerNorm, and the composites Sequential and Residual. Each owns its
// parameters and launches kernels from the kernels module on its
// environment's execution-space instance; none holds per-microbatch state.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"
#include "kpipe/model/tensor_split.hpp"

namespace kpipe::model {

// The kernels a layer computes with (compute.gemm, compute.attention).
struct KernelChoice {
  kernels::GemmPath gemm = kernels::GemmPath::vendor;
  kernels::AttentionPath attention = kernels::AttentionPath::gemm;
};

// How a weight matrix starts (model.init), drawn from a counter-based stream:
// uniform in +-scale or normal(0, scale).
struct WeightInit {
  bool normal = false;
  double scale = 0.0;

  // model.init for a fan_in x fan_out weight: uniform +-1/sqrt(fan_in), he
  // normal(0, sqrt(2/fan_in)), xavier uniform +-sqrt(6/(fan_in+fan_out)),
  // gpt2 normal(0, gpt2_std) (0.02, less for residual projections).
  // `automatic` must be resolved by the caller (the model kind decides).
  static WeightInit of(config::InitKind kind, int fan_in, int fan_out, double gpt2_std = 0.02);
};

// Fills `weight` as `init` says from the stream `key`.
template <class Scalar>
void initialise(const tensor::ExecutionSpace& space, const WeightInit& init, std::uint64_t key,
                const tensor::Matrix<Scalar>& weight);

// Y = X W + b with W input x output (so the GEMMs need no transposition on the
// forward pass) and b a 1 x output row. W starts as `init` says from the
// counter-based stream `init_key`, b is zero. With a split and a tensor group
// of t > 1 ranks, the layer holds its rank's shard of W (and of b when
// column-parallel), initialised as that slice of the whole W, so every t
// starts from the same model; input_dim() and output_dim() are then the
// local widths. Column-parallel over `blocks` equal blocks of the outputs (a
// fused Q|K|V projection: 3), a rank holds its slice of every block. Saves
// "x" in F, "x" and "dy" from B to W.
template <class Scalar>
class Linear final : public Layer<Scalar> {
 public:
  Linear(int input, int output, const std::string& name, std::uint64_t init_key, WeightInit init,
         kernels::GemmPath gemm, LayerEnvironment env, TensorSplit split = TensorSplit::none, int blocks = 1);

  const char* kind() const override { return "linear"; }
  int input_dim() const override { return static_cast<int>(weight_.value.extent(0)); }
  int output_dim() const override { return static_cast<int>(weight_.value.extent(1)); }
  int output_rows(int rows) const override { return rows * row_factor() / row_divisor(); }
  int input_rows(int rows) const override { return rows * row_divisor() / row_factor(); }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override { return {weight_, bias_}; }
  void weights_changed() override { packed_.invalidate(); }

 private:
  // Sequence parallelism: a column-parallel Linear gathers the group's rows
  // (t times its input's), a row-parallel one reduce-scatters them (1/t).
  int row_factor() const { return sequence_parallel_ && split_ == TensorSplit::column ? ranks_ : 1; }
  int row_divisor() const { return sequence_parallel_ && split_ == TensorSplit::row ? ranks_ : 1; }
  // A pooled buffer of the group's rows of `local`, stacked in rank order.
  tensor::Tensor gathered_rows(const tensor::Tensor& local, const char* label) const;

  LayerEnvironment env_;
  TensorSplit split_;  // none whenever the tensor group has one rank
  bool sequence_parallel_;
  int ranks_;  // of the tensor group
  Parameter<Scalar> weight_;
  Parameter<Scalar> bias_;
  kernels::GemmPath gemm_;
  kernels::PackedWeight<Scalar> packed_;  // GemmPath::packed: W and Wᵀ in the library's layout
};

// Y = f(X) elementwise. Saves "derivative", f'(X), in F; nothing after B.
template <class Scalar>
class ActivationLayer final : public Layer<Scalar> {
 public:
  ActivationLayer(kernels::Activation f, int dim, LayerEnvironment env) : env_(env), f_(f), dim_(dim) {}

  const char* kind() const override { return "activation"; }
  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }

 private:
  LayerEnvironment env_;
  kernels::Activation f_;
  int dim_;
};

// Where an MLP's sequence-parallel region starts and ends (the transformer's
// embedding and LM head do this themselves). `enter`: the whole input rows
// (the data, the same on every rank) to this rank's 1/t of them; the input
// gradient is the group's gathered rows. `leave`: this rank's rows to the
// group's gathered rows (the loss sees whole rows, computed alike on every
// rank); the input gradient is this rank's rows of that whole gradient.
enum class SequenceEdge { enter, leave };

template <class Scalar>
class SequenceEdgeLayer final : public Layer<Scalar> {
 public:
  SequenceEdgeLayer(SequenceEdge edge, int dim, LayerEnvironment env)
      : env_(env), edge_(edge), dim_(dim), ranks_(env.collectives.size(Group::tensor)) {}

  const char* kind() const override { return "sequence_edge"; }
  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  int output_rows(int rows) const override { return edge_ == SequenceEdge::enter ? rows / ranks_ : rows * ranks_; }
  int input_rows(int rows) const override { return edge_ == SequenceEdge::enter ? rows * ranks_ : rows / ranks_; }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }

 private:
  // local = this rank's 1/t of whole's rows.
  void keep_own_rows(const tensor::Tensor& whole, const tensor::Tensor& local) const;

  LayerEnvironment env_;
  SequenceEdge edge_;
  int dim_;
  int ranks_;
};

// Layer normalisation over features with epsilon 1e-5; gamma starts at one,
// beta at zero. Saves "xhat" and "rstd" in F, "xhat" and "dy" from B to W.
template <class Scalar>
class LayerNorm final : public Layer<Scalar> {
 public:
  LayerNorm(int dim, const std::string& name, LayerEnvironment env);

  const char* kind() const override { return "layer_norm"; }
  int input_dim() const override { return static_cast<int>(gamma_.value.extent(1)); }
  int output_dim() const override { return input_dim(); }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override { return {gamma_, beta_}; }

 private:
  LayerEnvironment env_;
  Parameter<Scalar> gamma_;
  Parameter<Scalar> beta_;
};

// Layers applied one after the other; the intermediates come from the pool.
// Saves nothing itself: one child context per layer.
template <class Scalar>
class Sequential final : public Layer<Scalar> {
 public:
  Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers, LayerEnvironment env);

  const char* kind() const override { return "sequential"; }
  int input_dim() const override { return layers_.front()->input_dim(); }
  int output_dim() const override { return layers_.back()->output_dim(); }
  int output_rows(int rows) const override;
  int input_rows(int rows) const override;
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { backward_weight(ctx, {}); }
  // W, calling after_layer(i) as soon as layer i's weight gradients are
  // accumulated: a data-parallel sum of them may start then.
  void backward_weight(Context& ctx, const std::function<void(int)>& after_layer);
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;
  int token_output_dim() const override { return layers_.back()->token_output_dim(); }
  std::vector<Parameter<Scalar>> parameters() const override;
  void weights_changed() override;

  int size() const { return static_cast<int>(layers_.size()); }
  const Layer<Scalar>& layer(int i) const { return *layers_.at(static_cast<std::size_t>(i)); }

 private:
  // Runs step(i, input, output) for each layer i in order, the intermediates
  // from the pool, width(layer) columns wide.
  template <class Width, class Step>
  void chain(tensor::TensorList inputs, tensor::TensorList outputs, const Width& width, const Step& step) const;

  LayerEnvironment env_;
  std::vector<std::unique_ptr<Layer<Scalar>>> layers_;
};

// Y = X + branch(X). Saves nothing itself: one child context, the branch's.
template <class Scalar>
class Residual final : public Layer<Scalar> {
 public:
  Residual(std::unique_ptr<Layer<Scalar>> branch, LayerEnvironment env);

  const char* kind() const override { return "residual"; }
  int input_dim() const override { return branch_->input_dim(); }
  int output_dim() const override { return branch_->output_dim(); }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;
  int token_output_dim() const override { return branch_->token_output_dim(); }
  std::vector<Parameter<Scalar>> parameters() const override { return branch_->parameters(); }
  void weights_changed() override { branch_->weights_changed(); }

 private:
  // outputs = inputs + what run_branch(branch output) writes.
  template <class RunBranch>
  void add_branch(tensor::TensorList inputs, tensor::TensorList outputs, const char* region,
                  const RunBranch& run_branch) const;

  LayerEnvironment env_;
  std::unique_ptr<Layer<Scalar>> branch_;
};

}  // namespace kpipe::model
