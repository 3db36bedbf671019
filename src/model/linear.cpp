#include <cmath>

#include "kpipe/kernels/random.hpp"
#include "kpipe/model/layers.hpp"

namespace kpipe::model {

using kernels::ExecutionSpace;
using kernels::Trans;

template <class Scalar>
Linear<Scalar>::Linear(int input, int output, const std::string& name, std::uint64_t init_key, kernels::GemmPath gemm)
    : weight_{name + ".weight", kernels::uninitialized_matrix<Scalar>("kpipe::model::" + name + ".weight", input, output),
              kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".weight.grad", input, output)},
      bias_{name + ".bias", kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".bias", 1, output),
            kernels::zero_matrix<Scalar>("kpipe::model::" + name + ".bias.grad", 1, output)},
      gemm_(gemm) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(input));
  kernels::fill_uniform(ExecutionSpace(), init_key, -bound, bound, weight_.value);
}

template <class Scalar>
void Linear<Scalar>::forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const {
  kernels::gemm(ExecutionSpace(), Trans::no, Trans::no, 1, X, weight_.value, 0, Y, gemm_);
  kernels::add_row(ExecutionSpace(), bias_.value, Y);
  if (ctx) ctx->saved = {X};
}

template <class Scalar>
void Linear<Scalar>::backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX,
                                    Context<Scalar>& ctx) const {
  if (dX.size() != 0) kernels::gemm(ExecutionSpace(), Trans::no, Trans::yes, 1, dY, weight_.value, 0, dX, gemm_);
  ctx.saved = {ctx.saved.at(0), dY};
}

template <class Scalar>
void Linear<Scalar>::backward_weight(Context<Scalar>& ctx) {
  const auto& X = ctx.saved.at(0);
  const auto& dY = ctx.saved.at(1);
  // beta = 1: the gradient buffer accumulates microbatches in the order W runs.
  kernels::gemm(ExecutionSpace(), Trans::yes, Trans::no, 1, X, dY, 1, weight_.grad, gemm_);
  kernels::add_column_sums(ExecutionSpace(), dY, bias_.grad);
  ctx.saved.clear();
}

template class Linear<float>;
template class Linear<double>;

}  // namespace kpipe::model
