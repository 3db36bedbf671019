// The weight gradient's product, dW += X^T dY over a microbatch's rows, at
// gradients of at least a core's L2: where the run log says kpipe's kernel
// streams it, each element is its starting value plus the rows' products in
// ascending row order, one rounding per row (std::fma), however the columns
// are sliced; on every CPU it stays within the float32 bound of a
// long-double product.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "random_matrix.hpp"
#include "skip.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

namespace {

bool streamed_here() { return vendor_gemm_library().find("streamed by kpipe's AVX-512 kernel") != std::string::npos; }

// dW (m x n) += X^T dY with X k x m and dY k x n, as one call of the vendor path.
void weight_gradient(const Matrix<float>& X, const Matrix<float>& dY, const Matrix<float>& dW) {
  gemm(ExecutionSpace(), Trans::yes, Trans::no, 1.0f, X, dY, 1.0f, dW, GemmPath::vendor);
  Kokkos::fence();
}

// Of dW += X^T dY at k, m, n: how many elements differ from the row-ordered
// std::fma chain, and how many lie outside the float32 bound of a
// long-double product.
struct Deviations {
  std::size_t unordered = 0, outside = 0;
};

Deviations weight_gradient_deviations(int k, int m, int n) {
  const auto X = random_matrix<float>(k, m, 11);
  const auto dY = random_matrix<float>(k, n, 12);
  const auto dW0 = random_matrix<float>(m, n, 13);
  const auto dW = clone<float>("test::dw", dW0);
  weight_gradient(X, dY, dW);

  const auto x = to_host<float>(X), dy = to_host<float>(dY), w0 = to_host<float>(dW0), w = to_host<float>(dW);
  Deviations deviations;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float chained = w0[i * n + j];
      long double exact = chained, magnitude = std::fabs(chained);
      for (int p = 0; p < k; ++p) {
        chained = std::fma(x[p * m + i], dy[p * n + j], chained);
        exact += static_cast<long double>(x[p * m + i]) * dy[p * n + j];
        magnitude += std::fabs(static_cast<long double>(x[p * m + i]) * dy[p * n + j]);
      }
      const float got = w[i * n + j];
      if (got != chained) ++deviations.unordered;
      // k + 1 roundings of at most 2^-24 each, relative to the terms' magnitudes (Higham's gamma_{k+1}).
      if (std::fabs(got - exact) > (k + 1) * 0x1p-24L * magnitude * 1.01L) ++deviations.outside;
    }
  }
  return deviations;
}

// k, m, n: row and column tails (515, 530), one row, a microbatch of 64; each at least 1 MiB.
const std::vector<std::tuple<int, int, int>> streamed_shapes = {
    {32, 512, 512}, {7, 515, 530}, {64, 520, 512}, {1, 1024, 300}};

}  // namespace

TEST_CASE("a weight gradient at a core's L2 stays within the float32 bound on every CPU", "[kernels][gemm]") {
  for (const auto& [k, m, n] : streamed_shapes) {
    INFO("k = " << k << ", m = " << m << ", n = " << n << ", vendor " << vendor_gemm_library());
    CHECK(weight_gradient_deviations(k, m, n).outside == 0);
  }
}

TEST_CASE("a streamed weight gradient sums each element in row order, one rounding per row", "[kernels][avx512]") {
  if (!streamed_here()) return kpipe::test::skip("this CPU or build leaves the weight gradient to the library");
  for (const auto& [k, m, n] : streamed_shapes) {
    INFO("k = " << k << ", m = " << m << ", n = " << n);
    CHECK(weight_gradient_deviations(k, m, n).unordered == 0);
  }
}

TEST_CASE("a streamed weight gradient is the same whole or in column slices", "[kernels][avx512]") {
  if (!streamed_here()) return kpipe::test::skip("this CPU or build leaves the weight gradient to the library");
  // Two slices of 300 and 301 columns, each past 1 MiB: both stream, as an
  // OpenMP rank's column slices of the whole product do.
  const int k = 32, m = 1024, n = 601, cut = 300;
  const auto X = random_matrix<float>(k, m, 21);
  const auto dY = random_matrix<float>(k, n, 22);
  const auto dW0 = random_matrix<float>(m, n, 23);
  const auto whole = clone<float>("test::whole", dW0);
  weight_gradient(X, dY, whole);
  const auto all = to_host<float>(whole);
  for (const auto& [first, last] : {std::pair{0, cut}, std::pair{cut, n}}) {
    // The slice's columns of dY and dW, copied out contiguous.
    const auto columns = std::make_pair(first, last);
    const auto dY_slice = uninitialized_matrix<float>("test::dy_slice", k, last - first);
    const auto slice = uninitialized_matrix<float>("test::slice", m, last - first);
    Kokkos::deep_copy(dY_slice, Kokkos::subview(dY, Kokkos::ALL, columns));
    Kokkos::deep_copy(slice, Kokkos::subview(dW0, Kokkos::ALL, columns));
    weight_gradient(X, dY_slice, slice);
    const auto part = to_host<float>(slice);
    std::size_t differ = 0;
    for (int i = 0; i < m; ++i) {
      for (int j = first; j < last; ++j) differ += all[i * n + j] != part[i * (last - first) + (j - first)];
    }
    INFO("columns [" << first << ", " << last << ")");
    CHECK(differ == 0);
  }
}
