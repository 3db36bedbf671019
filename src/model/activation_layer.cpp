#include "kpipe/model/activation_layer.hpp"

#include "kpipe/kernels/precision.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> ActivationLayer<Scalar>::saved(int rows) const {
  return {{"derivative", tensor::TensorSpec({rows, dim_}, stored())}};
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
  // f'(X) costs little once f(X) is computed, and backward then needs only
  // it, kept in the stored type (written there directly).
  const tensor::Tensor derivative =
      env_.exec.pool().take("kpipe::model::activation_derivative", stored(), static_cast<int>(X.extent(0)), dim_);
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
    kernels::activation_forward(env_.exec.space(), f_, X, Y, derivative.matrix<decltype(type)>());
  });
  ctx->save("derivative", derivative);
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                             Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
      using Stored = decltype(type);
      kernels::activation_backward<Scalar, Stored>(env_.exec.space(), ctx.saved("derivative").matrix<Stored>(),
                                                   output_grads.at(0).matrix<Scalar>(), dX);
    });
  }
  ctx.clear();
}

template <class Scalar>
tensor::DType ActivationLayer<Scalar>::stored() const {
  return kernels::stored_dtype<Scalar>(env_.precision);
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
