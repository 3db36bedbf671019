#pragma once
// The Linear layer: the GEMM every kind is built around, whole, split
// column- or row-parallel over the tensor group, or replicated on it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/kernel_choice.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/model/layers/tensor_split.hpp"
#include "kpipe/model/layers/weight_init.hpp"

namespace kpipe::model {

// Y = X W + b with W input x output (so the GEMMs need no transposition on the
// forward pass) and b a 1 x output row. W starts as `init` says from the
// counter-based stream `init_key`, b is zero. With a split and a tensor group
// of t > 1 ranks, the layer holds its rank's shard of W (and of b when
// column-parallel), initialised as that slice of the whole W, so every t
// starts from the same model; input_dim() and output_dim() are then the
// local widths. Column-parallel over `blocks` equal blocks of the outputs (a
// fused Q|K|V projection: 3), a rank holds its slice of every block.
// Replicated, every rank holds the whole W (tensor_split.hpp). Saves
// "x" in F, "x" and "dy" from B to W.
//
// kernels.precision = bf16 or fp16 (float layers only): the three GEMMs take
// bfloat16 or float16 operands and sum in float32 (kernels::gemm_mixed): X
// and dY rounded as they arrive, W from a rounded copy of the float32 master
// made at construction and at every weights_changed(). The saved "x" and
// "dy" are those rounded copies, half the bytes; outputs, input gradients,
// the bias and every gradient stay float32. fp16 runs no packed path.
//
// Outputs at or past `real_outputs` (-1: none; a padded vocabulary's logits; whole or
// column-parallel Linears) are padding: their weights and bias start zero,
// the real ones as an unpadded layer's, and their outputs are the lowest
// finite value, so no softmax gives them weight, their gradient is zero and
// they never learn. Checkpoints store the real columns only (Shard::valid).
//
// Without `bias` (GPT-2's LM head, model.head_bias = false) b is a zero row
// that is no parameter: nothing learns it, checkpoints do not hold it.
//
// WeightLayout::output_by_input stores W transposed, output x input (a tied
// LM head: the token table's layout, Y = X Tᵀ), split along its rows when
// column-parallel; its GEMMs transpose instead (never the packed path).
// tie(owner) makes W a tied copy of the parameter `owner` (Parameter::Tie).
enum class WeightLayout { input_by_output, output_by_input };

template <class Scalar>
class Linear final : public Layer<Scalar> {
 public:
  Linear(int input, int output, const std::string& name, std::uint64_t init_key, WeightInit init, KernelChoice kernels,
         LayerEnvironment env, TensorSplit split = TensorSplit::none, int blocks = 1, int real_outputs = -1,
         bool bias = true, WeightLayout layout = WeightLayout::input_by_output);

  const char* kind() const override { return "linear"; }
  int input_dim() const override { return static_cast<int>(weight_.value.extent(transposed_ ? 1 : 0)); }
  int output_dim() const override { return static_cast<int>(weight_.value.extent(transposed_ ? 0 : 1)); }
  int output_rows(int rows) const override { return rows * row_factor() / row_divisor(); }
  int input_rows(int rows) const override { return rows * row_divisor() / row_factor(); }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  bool backward_weight_on_any_thread() const override;
  // Whole (no tensor split), float32 operands, a library product on the calling thread, no padding.
  bool row_wise() const override;
  void forward_begin(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context* ctx, RowRange rows,
                    const tensor::ExecutionSpace& space) const override;
  void backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads, const Context& ctx,
                           RowRange rows, const tensor::ExecutionSpace& space) const override;
  void backward_input_end(tensor::TensorList output_grads, Context& ctx) const override;
  std::vector<Parameter<Scalar>> parameters() const override {
    if (!has_bias_) return {weight_};
    return {weight_, bias_};
  }
  void weights_changed() override;
  // W becomes the tied copy of `owner`, named as it (model.tie_embeddings).
  void tie(const std::string& owner) {
    weight_.name = owner;
    weight_.tie = Parameter<Scalar>::Tie::copy;
  }

 private:
  // Column-parallel and replicated: the input gradient is partial, summed over the group.
  bool sums_input_gradient() const { return split_ == TensorSplit::column || split_ == TensorSplit::replicated; }
  // Sequence parallelism: a column-parallel (or replicated) Linear gathers
  // the group's rows (t times its input's), a row-parallel one
  // reduce-scatters them (1/t).
  int row_factor() const { return sequence_parallel_ && sums_input_gradient() ? ranks_ : 1; }
  int row_divisor() const { return sequence_parallel_ && split_ == TensorSplit::row ? ranks_ : 1; }
  bool bf16() const { return precision_ == kernels::Precision::bf16; }
  // compute.precision = bf16 or fp16: the GEMMs take rounded operands.
  bool reduced() const { return precision_ != kernels::Precision::fp32; }
  // The element type of the GEMMs' operands (and of the saved x).
  tensor::DType operand_dtype() const { return kernels::stored_dtype<Scalar>(precision_); }
  // Writes the lowest finite value to the padding columns of this rank's outputs Y.
  void mask_padding(const tensor::Matrix<Scalar>& Y) const;
  // A pooled buffer of the group's rows of `local`, stacked in rank order.
  tensor::Tensor gathered_rows(const tensor::Tensor& local, const char* label) const;
  // `x` as the GEMMs take it: itself, or rounded to bfloat16 or float16 in a pooled buffer.
  tensor::Tensor operand(const tensor::Tensor& x, const char* label) const;
  // C = op(A) op(B) + beta C on the layer's GEMM path and precision, from
  // operands as operand() makes them (W: weight_operand()), then `then`.
  void multiply(kernels::Trans trans_a, kernels::Trans trans_b, const tensor::Tensor& A, const tensor::Tensor& B,
                Scalar beta, const tensor::Matrix<Scalar>& C, const kernels::ColumnEpilogue<Scalar>& then = {}) const;
  tensor::Tensor weight_operand() const;

  LayerEnvironment env_;
  TensorSplit split_;  // none whenever the tensor group has one rank
  bool has_bias_;
  bool transposed_;  // WeightLayout::output_by_input
  bool sequence_parallel_;
  int ranks_;  // of the tensor group
  Parameter<Scalar> weight_;
  Parameter<Scalar> bias_;
  kernels::GemmPath gemm_;
  kernels::Precision precision_;
  // GemmPath::packed only: W and Wᵀ in the library's layout. Made for that
  // path alone, so that no other run loads a packed library (libxsmm's JIT
  // registry is megabytes) after the memory estimate took its baseline.
  std::unique_ptr<kernels::PackedWeight<Scalar>> packed_;
  tensor::Tensor weight_reduced_;  // bf16, fp16: W rounded, refreshed by weights_changed()
};

}  // namespace kpipe::model
