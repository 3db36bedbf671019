#include "kpipe/model/layers.hpp"

namespace kpipe::model {

using kernels::ExecutionSpace;

template <class Scalar>
Residual<Scalar>::Residual(std::unique_ptr<Layer<Scalar>> branch) : branch_(std::move(branch)) {}

template <class Scalar>
void Residual<Scalar>::forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const {
  const auto branch = kernels::uninitialized_matrix<Scalar>("kpipe::model::residual_branch", static_cast<int>(X.extent(0)),
                                                            output_dim());
  if (ctx) ctx->children.assign(1, {});
  branch_->forward(X, branch, ctx ? &ctx->children[0] : nullptr);
  kernels::add(ExecutionSpace(), X, branch, Y);
}

template <class Scalar>
void Residual<Scalar>::backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX,
                                      Context<Scalar>& ctx) const {
  // The branch still runs without dX: its weights need their gradients.
  const bool wanted = dX.size() != 0;
  const auto branch_gradient =
      wanted ? kernels::uninitialized_matrix<Scalar>("kpipe::model::residual_branch_grad",
                                                     static_cast<int>(dY.extent(0)), input_dim())
             : Matrix<Scalar>();
  branch_->backward_input(dY, branch_gradient, ctx.children.at(0));
  if (wanted) kernels::add(ExecutionSpace(), dY, branch_gradient, dX);
}

template <class Scalar>
void Residual<Scalar>::backward_weight(Context<Scalar>& ctx) {
  branch_->backward_weight(ctx.children.at(0));
  ctx.children.clear();
}

template class Residual<float>;
template class Residual<double>;

}  // namespace kpipe::model
