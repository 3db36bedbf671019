#pragma once
// An elementwise activation (model.activation) as a layer.

#include <vector>

#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/model/layer.hpp"

namespace kpipe::model {

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
  bool backward_weight_on_any_thread() const override { return true; }
  bool row_wise() const override { return true; }
  void forward_begin(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context* ctx, RowRange rows,
                    const tensor::ExecutionSpace& space) const override;
  void backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads, const Context& ctx,
                           RowRange rows, const tensor::ExecutionSpace& space) const override;
  void backward_input_end(tensor::TensorList, Context& ctx) const override { ctx.clear(); }

 private:
  // The derivative's element type (kernels::stored_dtype).
  tensor::DType stored() const;

  LayerEnvironment env_;
  kernels::Activation f_;
  int dim_;
};

}  // namespace kpipe::model
