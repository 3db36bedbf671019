#include "kpipe/model/layers/activation_layer.hpp"

#include "kpipe/kernels/precision.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> ActivationLayer<Scalar>::saved(int rows) const {
  return {{"derivative", tensor::TensorSpec({rows, dim_}, stored())}};
}

template <class Scalar>
void ActivationLayer<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::forward");
  forward_begin(inputs, outputs, ctx);
  forward_rows(inputs, outputs, ctx, RowRange::all_of(inputs.at(0)), env_.exec.space());
}

template <class Scalar>
void ActivationLayer<Scalar>::forward_begin(tensor::TensorList inputs, tensor::TensorList, Context* ctx) const {
  // f'(X) costs little once f(X) is computed, and backward then needs only
  // it, kept in the stored type (written there directly).
  if (ctx) {
    ctx->save("derivative", env_.exec.pool().take("kpipe::model::activation_derivative", stored(),
                                                  static_cast<int>(inputs.at(0).spec().extent(0)), dim_));
  }
}

template <class Scalar>
void ActivationLayer<Scalar>::forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context* ctx,
                                           RowRange rows, const tensor::ExecutionSpace& space) const {
  const auto X = rows.of(inputs.at(0).matrix<Scalar>());
  const auto Y = rows.of(outputs.at(0).matrix<Scalar>());
  if (!ctx) {
    kernels::activation_forward(space, f_, X, Y);
    return;
  }
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
    kernels::activation_forward(space, f_, X, Y, rows.of(ctx->saved("derivative").matrix<decltype(type)>()));
  });
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                             Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::activation::backward_input");
  backward_input_rows(output_grads, input_grads, ctx, RowRange::all_of(output_grads.at(0)), env_.exec.space());
  backward_input_end(output_grads, ctx);
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                                  const Context& ctx, RowRange rows,
                                                  const tensor::ExecutionSpace& space) const {
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() == 0) return;
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
    using Stored = decltype(type);
    kernels::activation_backward<Scalar, Stored>(space, rows.of(ctx.saved("derivative").matrix<Stored>()),
                                                 rows.of(output_grads.at(0).matrix<Scalar>()), rows.of(dX));
  });
}

template <class Scalar>
tensor::DType ActivationLayer<Scalar>::stored() const {
  return kernels::stored_dtype<Scalar>(env_.precision);
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
