#pragma once
// The optimizer updates of parameter matrices, as PyTorch defines them, so
// hyperparameters carry over. State matrices have the parameter's shape and
// start at zero. Gradient clipping is a factor the update reads the gradient
// with (rounded as scaling it in place would be), so the gradient itself
// stays as summed and an update can be redone with another factor.
//
// Each call updates a list of parameters: on a threaded host in one parallel
// region, each thread an equal share of all their elements (a region per
// parameter cost more than a bias's update does), elsewhere a kernel per
// parameter. Every element is updated alike either way.

#include <vector>

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// One parameter of an update: its value w, its gradient g, its state (SGD:
// `first` the momentum buffer, `second` unused; AdamW: exp_avg and
// exp_avg_sq), and its weight decay (SGD: an L2 term added to the gradient;
// AdamW: decoupled, w *= 1 - lr * weight_decay).
template <class Scalar>
struct ParameterUpdate {
  tensor::Matrix<Scalar> w;
  tensor::ConstMatrix<Scalar> g;
  tensor::Matrix<Scalar> first;
  tensor::Matrix<Scalar> second;
  double weight_decay = 0;
};

// A gradient and the host thread that writes it in W (Parameter::host_thread; -1: any).
template <class Scalar>
struct OwnedGradient {
  tensor::Matrix<Scalar> g;
  int thread = -1;
};

// Zeroes the gradients (Stage::zero_grad): on a threaded host where every
// gradient names its thread, in one parallel region, each on its thread;
// otherwise a deep_copy each.
template <class Scalar>
void zero_gradients(const tensor::ExecutionSpace& space, const std::vector<OwnedGradient<Scalar>>& gradients);

struct SgdCoefficients {
  double lr = 0;
  double momentum = 0;
  double grad_scale = 1;  // the clip factor: every gradient is read as g * grad_scale
};

// g = g * grad_scale; g' = g + weight_decay * w; velocity = momentum * velocity + g'; w -= lr * velocity.
template <class Scalar>
void sgd_update(const tensor::ExecutionSpace& space, const SgdCoefficients& c,
                const std::vector<ParameterUpdate<Scalar>>& parameters);

struct AdamWCoefficients {
  double lr = 0;
  double beta1 = 0;
  double beta2 = 0;
  double epsilon = 0;
  int step = 1;           // 1 for the first update; drives the bias correction
  double grad_scale = 1;  // the clip factor: every gradient is read as g * grad_scale
};

// g = g * grad_scale; w *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + epsilon).
template <class Scalar>
void adamw_update(const tensor::ExecutionSpace& space, const AdamWCoefficients& c,
                  const std::vector<ParameterUpdate<Scalar>>& parameters);

}  // namespace kpipe::kernels
