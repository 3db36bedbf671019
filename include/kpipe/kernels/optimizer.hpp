#pragma once
// The optimizer updates of one parameter matrix, as PyTorch defines them, so
// hyperparameters carry over. State matrices have the parameter's shape and
// start at zero. Gradient clipping is a factor the update reads the gradient
// with (rounded as scaling it in place would be), so the gradient itself
// stays as summed and an update can be redone with another factor.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

struct SgdCoefficients {
  double lr = 0;
  double momentum = 0;
  double weight_decay = 0;  // L2 term added to the gradient
  double grad_scale = 1;    // the clip factor: every gradient is read as g * grad_scale
};

// g = g * grad_scale; g' = g + weight_decay * w; velocity = momentum * velocity + g'; w -= lr * velocity.
template <class Scalar>
void sgd_update(const tensor::ExecutionSpace& space, const SgdCoefficients& c, const tensor::Matrix<Scalar>& w,
                const tensor::ConstMatrix<tensor::identity_t<Scalar>>& g, const tensor::Matrix<Scalar>& velocity);

struct AdamWCoefficients {
  double lr = 0;
  double beta1 = 0;
  double beta2 = 0;
  double epsilon = 0;
  double weight_decay = 0;  // decoupled: w *= 1 - lr * weight_decay
  int step = 1;             // 1 for the first update; drives the bias correction
  double grad_scale = 1;    // the clip factor: every gradient is read as g * grad_scale
};

// g = g * grad_scale; w *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + epsilon).
template <class Scalar>
void adamw_update(const tensor::ExecutionSpace& space, const AdamWCoefficients& c, const tensor::Matrix<Scalar>& w,
                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& g, const tensor::Matrix<Scalar>& m,
                  const tensor::Matrix<Scalar>& v);

}  // namespace kpipe::kernels
