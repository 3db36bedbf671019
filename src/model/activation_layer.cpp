#include "kpipe/model/layer_kinds.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> ActivationLayer<Scalar>::saved(int rows) const {
  return {{"x", tensor::TensorSpec::matrix<Scalar>(rows, dim_)}};
}

template <class Scalar>
void ActivationLayer<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::forward");
  kernels::activation_forward(env_.exec.space(), f_, inputs.at(0).matrix<Scalar>(), outputs.at(0).matrix<Scalar>());
  if (ctx) ctx->save("x", inputs.at(0));
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                             Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    kernels::activation_backward(env_.exec.space(), f_, ctx.saved("x").matrix<Scalar>(),
                                 output_grads.at(0).matrix<Scalar>(), dX);
  }
  ctx.clear();
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
