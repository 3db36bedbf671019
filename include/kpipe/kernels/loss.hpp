#pragma once
// Loss kernels. Each returns `scale` times the sum of the per-sample losses of
// the rows it is given and writes dY, the gradient of that scaled sum. With
// scale = 1 / global_batch, the microbatch gradients of a whole step add up to
// the gradient of the mean loss.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Softmax cross-entropy of logits against class labels, computed from the
// log-sum-exp shifted by the row maximum so that no exponential overflows.
// A label outside [0, classes) makes the loss NaN instead of reading past the row.
template <class Scalar>
double softmax_cross_entropy(const tensor::ExecutionSpace& space,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                             const tensor::ConstLabels& labels, tensor::identity_t<Scalar> scale,
                             const tensor::Matrix<Scalar>& dlogits);

// Mean squared error per sample, mean((y - t)^2) over the outputs.
template <class Scalar>
double mean_squared_error(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& targets,
                          tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY);

}  // namespace kpipe::kernels
