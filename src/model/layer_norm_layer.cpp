#include "kpipe/kernels/layer_norm.hpp"
#include "kpipe/model/layers.hpp"

namespace kpipe::model {

using kernels::ExecutionSpace;

namespace {
constexpr double epsilon = 1e-5;
}  // namespace

template <class Scalar>
LayerNorm<Scalar>::LayerNorm(int dim, const std::string& name)
    : gamma_{name + ".gamma", kernels::uninitialized_matrix<Scalar>("kpipe::model::" + name + ".gamma", 1, dim),
             kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".gamma.grad", 1, dim)},
      beta_{name + ".beta", kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".beta", 1, dim),
            kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".beta.grad", 1, dim)} {
  Kokkos::deep_copy(gamma_.value, Scalar(1));
}

template <class Scalar>
void LayerNorm<Scalar>::forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const {
  const int rows = static_cast<int>(X.extent(0));
  const auto xhat = kernels::uninitialized_matrix<Scalar>("kpipe::model::layer_norm_xhat", rows, input_dim());
  const auto rstd = kernels::uninitialized_matrix<Scalar>("kpipe::model::layer_norm_rstd", rows, 1);
  kernels::layer_norm_forward(ExecutionSpace(), X, gamma_.value, beta_.value, Scalar(epsilon), Y, xhat, rstd);
  if (ctx) ctx->saved = {xhat, rstd};
}

template <class Scalar>
void LayerNorm<Scalar>::backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX,
                                       Context<Scalar>& ctx) const {
  const auto xhat = ctx.saved.at(0);
  if (dX.size() != 0) kernels::layer_norm_backward_input(ExecutionSpace(), dY, xhat, ctx.saved.at(1), gamma_.value, dX);
  ctx.saved = {xhat, dY};
}

template <class Scalar>
void LayerNorm<Scalar>::backward_weight(Context<Scalar>& ctx) {
  kernels::layer_norm_backward_weight(ExecutionSpace(), ctx.saved.at(1), ctx.saved.at(0), gamma_.grad, beta_.grad);
  ctx.saved.clear();
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace kpipe::model
