#pragma once
// The loss at the last stage. For a microbatch it returns the loss scaled by
// 1 / global_batch and writes dY, the gradient of that scaled loss, so the
// microbatch gradients of a step add up to the gradient of the mean loss and
// data-parallel replicas sum (not average) their gradients.

#include <cstdint>

#include "kpipe/model/spec.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

// Targets of a microbatch: class labels for cross-entropy, a row of target
// values per sample for MSE. Only the member the loss needs is allocated.
template <class Scalar>
struct Targets {
  tensor::Labels labels;
  tensor::Matrix<Scalar> values;
};

template <class Scalar>
Targets<Scalar> make_targets(LossKind loss, int rows, int outputs);

// Returns scale * sum of the per-sample losses of Y and writes dY, on the
// context's instance. The host waits for the value, which lets callers check
// it for NaN or Inf at once.
template <class Scalar>
double loss_and_gradient(const tensor::ExecContext& exec, LossKind loss,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y, const Targets<Scalar>& targets,
                         tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY);

// Throws a runtime error naming the step and the microbatch (and the replica
// when d > 1) if `loss` is NaN or Inf. Callers check before the optimizer
// step, so the weights stay those of the last good step.
void require_finite_loss(double loss, std::int64_t step, int microbatch, int replica, int data_parallel);

}  // namespace kpipe::model
