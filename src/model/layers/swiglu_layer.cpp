#include "kpipe/model/layers/swiglu_layer.hpp"

#include "kpipe/kernels/precision.hpp"
#include "kpipe/kernels/swiglu.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<TensorDecl> SwiGLU<Scalar>::saved(int rows) const {
  return {{"x", tensor::TensorSpec({rows, input_dim()}, kernels::stored_dtype<Scalar>(env_.precision))}};
}

template <class Scalar>
void SwiGLU<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::swiglu::forward");
  kernels::swiglu_forward(env_.exec.space(), inputs.at(0).matrix<Scalar>(), outputs.at(0).matrix<Scalar>());
  if (ctx) {
    ctx->save("x", kernels::rounded(env_.exec, inputs.at(0), kernels::stored_dtype<Scalar>(env_.precision),
                                    "kpipe::model::swiglu_x_stored"));
  }
}

template <class Scalar>
void SwiGLU<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                    Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::swiglu::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
      using Stored = decltype(type);
      kernels::swiglu_backward<Scalar, Stored>(env_.exec.space(), ctx.saved("x").matrix<Stored>(),
                                               output_grads.at(0).matrix<Scalar>(), dX);
    });
  }
  ctx.clear();
}

template class SwiGLU<float>;
template class SwiGLU<double>;

}  // namespace kpipe::model
