#pragma once
// Finite-difference gradient checks in double: central differences of a
// scalar function of device tensors, perturbing one element at a time.

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "kpipe/kernels/random.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"

namespace kpipe::test {

using tensor::Matrix;

// d f / d tensor(i, j) for every element, by (f(t + h) - f(t - h)) / 2h.
inline std::vector<double> numeric_gradient(const Matrix<double>& tensor, const std::function<double()>& f,
                                            double h = 1e-5) {
  const auto values = tensor::to_host<double>(tensor);
  const std::size_t cols = tensor.extent(1);
  std::vector<double> gradient;
  for (std::size_t e = 0; e < values.size(); ++e) {
    const auto element = Kokkos::subview(tensor, e / cols, e % cols);
    Kokkos::deep_copy(element, values[e] + h);
    const double up = f();
    Kokkos::deep_copy(element, values[e] - h);
    const double down = f();
    Kokkos::deep_copy(element, values[e]);
    gradient.push_back((up - down) / (2 * h));
  }
  return gradient;
}

// sum(Y * R): a scalar whose gradient with respect to Y is R.
inline double weighted_sum(const Matrix<double>& Y, const Matrix<double>& R) {
  const auto y = tensor::to_host<double>(Y);
  const auto r = tensor::to_host<double>(R);
  double sum = 0;
  for (std::size_t e = 0; e < y.size(); ++e) sum += y[e] * r[e];
  return sum;
}

}  // namespace kpipe::test
