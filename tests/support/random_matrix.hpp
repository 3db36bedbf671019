#pragma once
// Matrices of uniform random numbers from kpipe's counter-based streams: the
// same values on every backend, so tests are reproducible.

#include <cstdint>

#include "kpipe/kernels/random.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::test {

template <class Scalar = double>
tensor::Matrix<Scalar> random_matrix(int rows, int cols, std::uint64_t stream, double low = -1, double high = 1) {
  auto m = tensor::uninitialized_matrix<Scalar>("test::random", rows, cols);
  kernels::fill_uniform(tensor::ExecutionSpace(), kernels::stream_key(2024, stream), low, high, m);
  return m;
}

}  // namespace kpipe::test
