#pragma once
// SwiGLU (kernels/swiglu.hpp) as a layer: the gated activation between a
// column-parallel gate|up projection and the down projection of Llama's MLP.

#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// Y = silu(A) ⊙ B for X = [A | B], rows x 2n in, rows x n out. Saves "x" in
// F (in the stored type under compute.precision); nothing after B.
template <class Scalar>
class SwiGLU final : public Layer<Scalar> {
 public:
  SwiGLU(int width, LayerEnvironment env) : env_(env), width_(width) {}

  const char* kind() const override { return "swiglu"; }
  int input_dim() const override { return 2 * width_; }
  int output_dim() const override { return width_; }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }

 private:
  LayerEnvironment env_;
  int width_;  // n: this rank's columns of the MLP's intermediate width
};

}  // namespace kpipe::model
