#include "kpipe/model/layers/residual.hpp"

#include "kpipe/kernels/elementwise.hpp"

namespace kpipe::model {

template <class Scalar>
Residual<Scalar>::Residual(std::unique_ptr<Layer<Scalar>> branch, LayerEnvironment env)
    : env_(env), branch_(std::move(branch)) {}

template <class Scalar>
template <class RunBranch>
void Residual<Scalar>::add_branch(tensor::TensorList inputs, tensor::TensorList outputs, const char* region,
                                  const RunBranch& run_branch) const {
  const auto scope = env_.exec.region(region);
  const auto X = inputs.at(0).matrix<Scalar>();
  const auto Y = outputs.at(0).matrix<Scalar>();
  // Nothing saves the branch output, so the buffer is free again on return.
  const auto branch = env_.exec.pool().take<Scalar>("kpipe::model::residual_branch", Y.extent_int(0), Y.extent_int(1));
  run_branch(tensor::Tensor(branch));
  kernels::add(env_.exec.space(), X, branch, Y);
}

template <class Scalar>
void Residual<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  if (ctx) ctx->reset_children(1);
  add_branch(inputs, outputs, "kpipe::model::residual::forward", [&](const tensor::Tensor& branch) {
    branch_->forward(inputs, {branch}, ctx ? &ctx->children[0] : nullptr);
  });
}

template <class Scalar>
void Residual<Scalar>::infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const {
  add_branch(inputs, outputs, "kpipe::model::residual::infer",
             [&](const tensor::Tensor& branch) { branch_->infer(inputs, {branch}, batch); });
}

template <class Scalar>
void Residual<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                      Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::residual::backward_input");
  // The branch still runs without dX: its weights need their gradients.
  const auto dX = input_grads.at(0).matrix<Scalar>();
  const bool wanted = dX.size() != 0;
  const auto dY = output_grads.at(0).matrix<Scalar>();
  const auto branch_gradient =
      wanted ? env_.exec.pool().take<Scalar>("kpipe::model::residual_branch_grad", dY.extent_int(0), input_dim())
             : tensor::Matrix<Scalar>();
  branch_->backward_input(output_grads, {wanted ? tensor::Tensor(branch_gradient) : tensor::Tensor()},
                          ctx.children.at(0));
  if (wanted) kernels::add(env_.exec.space(), dY, branch_gradient, dX);
}

template <class Scalar>
void Residual<Scalar>::backward_weight(Context& ctx) {
  branch_->backward_weight(ctx.children.at(0));
  ctx.clear();
}

template class Residual<float>;
template class Residual<double>;

}  // namespace kpipe::model
