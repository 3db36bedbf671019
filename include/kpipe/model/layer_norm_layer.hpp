#pragma once
// Layer normalisation over features as a layer.

#include <string>
#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// Layer normalisation over features with epsilon 1e-5; gamma starts at one,
// beta at zero. Saves "xhat" and "rstd" in F, "xhat" and "dy" from B to W;
// with compute.precision = bf16 or fp16 x̂ and dy in that type, 1/std in float32.
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
  // The element type x̂ and dy are kept in (kernels::stored_dtype).
  tensor::DType stored() const;

  LayerEnvironment env_;
  Parameter<Scalar> gamma_;
  Parameter<Scalar> beta_;
};

}  // namespace kpipe::model
