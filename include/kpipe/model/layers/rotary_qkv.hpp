#pragma once
// Rotary position embeddings and grouped-query attention's shared key/value
// heads as a layer between a grouped QKV projection and the attention core
// (kernels/rotary.hpp): Llama's attention input.

#include <vector>

#include "kpipe/kernels/rotary.hpp"
#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// Positions x grouped_width in, positions x 3·heads·hd (the Q|K|V that
// CausalSelfAttention reads) out; no parameters, nothing saved: the
// rotations and repeats are linear, so B needs only the output gradient.
// In infer each token is rotated by its position in its sequence; on packed
// documents, by its place in its document.
template <class Scalar>
class RotaryQKV final : public Layer<Scalar> {
 public:
  // `shape.tokens` is the context: the positions the angle tables hold.
  RotaryQKV(kernels::RotaryShape shape, double theta, LayerEnvironment env);

  const char* kind() const override { return "rotary_qkv"; }
  int input_dim() const override { return shape_.grouped_width(); }
  int output_dim() const override { return shape_.output_width(); }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;

 private:
  // The packed documents' places of `rows`' positions; none without packing.
  Kokkos::View<const int*, tensor::MemorySpace> positions(const tensor::Tensor& rows) const;

  LayerEnvironment env_;
  kernels::RotaryShape shape_;
  tensor::Matrix<Scalar> cos_;  // context x hd/2
  tensor::Matrix<Scalar> sin_;
};

}  // namespace kpipe::model
