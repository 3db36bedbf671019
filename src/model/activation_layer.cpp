#include "kpipe/model/activation_layer.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> ActivationLayer<Scalar>::saved(int rows) const {
  return {{"derivative", tensor::TensorSpec::matrix<Scalar>(rows, dim_)}};
}

template <class Scalar>
void ActivationLayer<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::forward");
  const auto X = inputs.at(0).matrix<Scalar>();
  const auto Y = outputs.at(0).matrix<Scalar>();
  if (!ctx) {
    kernels::activation_forward(env_.exec.space(), f_, X, Y);
    return;
  }
  // f'(X) costs little once f(X) is computed, and backward then needs only it.
  const auto derivative =
      env_.exec.pool().take<Scalar>("kpipe::model::activation_derivative", static_cast<int>(X.extent(0)), dim_);
  kernels::activation_forward(env_.exec.space(), f_, X, Y, derivative);
  ctx->save("derivative", derivative);
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                             Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    kernels::activation_backward(env_.exec.space(), ctx.saved("derivative").matrix<Scalar>(),
                                 output_grads.at(0).matrix<Scalar>(), dX);
  }
  ctx.clear();
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
