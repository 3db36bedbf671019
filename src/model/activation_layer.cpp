#include "kpipe/model/activation_layer.hpp"

#include "kpipe/kernels/precision.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> ActivationLayer<Scalar>::saved(int rows) const {
  return {{"derivative", tensor::TensorSpec({rows, dim_}, kernels::stored_dtype<Scalar>(env_.precision))}};
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
  ctx->save("derivative", kernels::rounded(env_.exec, derivative, kernels::stored_dtype<Scalar>(env_.precision),
                                           "kpipe::model::activation_derivative_stored"));
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                             Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    const tensor::Tensor derivative =
        kernels::widened(env_.exec, ctx.saved("derivative"), "kpipe::model::activation_derivative_widened");
    kernels::activation_backward(env_.exec.space(), derivative.matrix<Scalar>(), output_grads.at(0).matrix<Scalar>(),
                                 dX);
  }
  ctx.clear();
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
