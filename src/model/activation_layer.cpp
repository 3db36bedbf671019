#include "kpipe/model/layers.hpp"

namespace kpipe::model {

using kernels::ExecutionSpace;

template <class Scalar>
void ActivationLayer<Scalar>::forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y,
                                      Context<Scalar>* ctx) const {
  kernels::activation_forward(ExecutionSpace(), f_, X, Y);
  if (ctx) ctx->saved = {X};
}

template <class Scalar>
void ActivationLayer<Scalar>::backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX,
                                             Context<Scalar>& ctx) const {
  if (dX.size() != 0) kernels::activation_backward(ExecutionSpace(), f_, ctx.saved.at(0), dY, dX);
  ctx.saved.clear();
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace kpipe::model
