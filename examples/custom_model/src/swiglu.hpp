#pragma once
// A SwiGLU MLP block (Shazeer, "GLU Variants Improve Transformer", 2020; the
// MLP of LLaMA) as a kpipe layer kind, the block of the swiglu_mlp family:
//
//   y = x + W2 (silu(W1 LN(x)) ⊙ W3 LN(x))
//
// Over a tensor group of t ranks it splits like Megatron's MLP: W1 and W3
// column-parallel (fused into one projection of two blocks, so a rank holds
// the same h/t columns of each), W2 row-parallel, one sum each way.

#include "kpipe/model/layer_kind.hpp"

namespace custom {

// Y = silu(A) ⊙ B for X = [A | B], rows x 2n in, rows x n out. Saves X in F;
// nothing after B.
template <class Scalar>
class SwiGLU final : public kpipe::model::Layer<Scalar> {
 public:
  SwiGLU(int width, kpipe::model::LayerEnvironment env) : env_(env), width_(width) {}

  const char* kind() const override { return "swiglu"; }
  int input_dim() const override { return 2 * width_; }
  int output_dim() const override { return width_; }
  std::vector<kpipe::model::TensorDecl> saved(int rows) const override;
  void forward(kpipe::tensor::TensorList inputs, kpipe::tensor::TensorList outputs,
               kpipe::model::Context* ctx) const override;
  void backward_input(kpipe::tensor::TensorList output_grads, kpipe::tensor::TensorList input_grads,
                      kpipe::model::Context& ctx) const override;
  void backward_weight(kpipe::model::Context& ctx) override { ctx.clear(); }

 private:
  kpipe::model::LayerEnvironment env_;
  int width_;  // n: this rank's hidden columns
};

// The kind "swiglu_block": width w -> w, intermediate width model.swiglu_hidden.
kpipe::model::LayerKind swiglu_block_kind();

}  // namespace custom
