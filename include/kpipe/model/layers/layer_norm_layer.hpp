#pragma once
// Normalisation over each row's features as a layer: LayerNorm, or RMSNorm
// (Llama's: no centring, no beta).

#include <string>
#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

enum class Normalisation {
  layer,  // (x - mean) / std * gamma + beta
  rms,    // x / rms * gamma
};

// The normalisation of a row and its epsilon (GPT-2's LayerNorm: 1e-5).
struct NormSpec {
  Normalisation kind = Normalisation::layer;
  double epsilon = 1e-5;
};

// Normalisation over features; gamma starts at one, beta (LayerNorm only)
// at zero. Saves "xhat" and "rstd" in F, "xhat" and "dy" from B to W; with
// compute.precision = bf16 or fp16 x̂ and dy in that type, 1/std in float32.
template <class Scalar>
class LayerNorm final : public Layer<Scalar> {
 public:
  LayerNorm(int dim, const std::string& name, LayerEnvironment env, NormSpec spec = {});

  const char* kind() const override { return spec_.kind == Normalisation::rms ? "rms_norm" : "layer_norm"; }
  int input_dim() const override { return static_cast<int>(gamma_.value.extent(1)); }
  int output_dim() const override { return input_dim(); }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override;

 private:
  // The element type x̂ and dy are kept in (kernels::stored_dtype).
  tensor::DType stored() const;

  bool centred() const { return spec_.kind == Normalisation::layer; }

  LayerEnvironment env_;
  NormSpec spec_;
  Parameter<Scalar> gamma_;
  Parameter<Scalar> beta_;  // LayerNorm's; empty for RMSNorm
};

}  // namespace kpipe::model
