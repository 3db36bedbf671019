// Batched GEMM: every block equals a plain GEMM of that block, on both paths
// (bit for bit, except cuBLAS' batched kernels), and all of them equal a
// long-double host product; so do blocks cut out of
// wider matrices (row_blocks), whose other columns stay untouched.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"
#include "vendor_gemm.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

using kpipe::test::relative_error;

namespace {

// Rows [block·rows, (block + 1)·rows) of a stack, as a matrix of its own.
template <class Scalar>
Matrix<Scalar> block_of(const Matrix<Scalar>& stack, int block, int batch) {
  const int rows = static_cast<int>(stack.extent(0)) / batch;
  auto copy = uninitialized_matrix<Scalar>("test::block", rows, static_cast<int>(stack.extent(1)));
  Kokkos::deep_copy(copy, Kokkos::subview(stack, std::pair<int, int>(block * rows, (block + 1) * rows), Kokkos::ALL));
  return copy;
}

// alpha op(A_i) op(B_i) + beta C_i for every block i, in long double, stacked.
template <class Scalar>
std::vector<long double> reference(int batch, Trans ta, Trans tb, double alpha, const Matrix<Scalar>& A,
                                   const Matrix<Scalar>& B, double beta, const Matrix<Scalar>& C) {
  const auto a = to_host<Scalar>(A);
  const auto b = to_host<Scalar>(B);
  const auto c = to_host<Scalar>(C);
  const std::size_t m = C.extent(0) / batch, n = C.extent(1);
  const std::size_t k = ta == Trans::no ? A.extent(1) : A.extent(0) / batch;
  std::vector<long double> out(c.size());
  for (int block = 0; block < batch; ++block) {
    const Scalar* ab = a.data() + block * m * k;
    const Scalar* bb = b.data() + block * k * n;
    const auto op_a = [&](std::size_t i, std::size_t l) { return ta == Trans::no ? ab[i * k + l] : ab[l * m + i]; };
    const auto op_b = [&](std::size_t l, std::size_t j) { return tb == Trans::no ? bb[l * n + j] : bb[j * k + l]; };
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        long double sum = 0;
        for (std::size_t l = 0; l < k; ++l) sum += static_cast<long double>(op_a(i, l)) * op_b(l, j);
        const std::size_t e = (block * m + i) * n + j;
        out[e] = alpha * sum + beta * static_cast<long double>(c[e]);
      }
    }
  }
  return out;
}

// Columns [first, first + cols) of X, as a matrix of their own.
template <class Scalar>
Matrix<Scalar> columns_of(const Matrix<Scalar>& X, int first, int cols) {
  auto copy = uninitialized_matrix<Scalar>("test::columns", static_cast<int>(X.extent(0)), cols);
  Kokkos::deep_copy(copy, Kokkos::subview(X, Kokkos::ALL, std::pair<int, int>(first, first + cols)));
  return copy;
}

}  // namespace

TEMPLATE_TEST_CASE("each block of a batched GEMM equals the GEMM of that block", "[kernels][gemm]", float, double) {
  using Scalar = TestType;
  const auto [m, n, k] = GENERATE(std::tuple{1, 1, 1}, std::tuple{17, 33, 65}, std::tuple{40, 70, 20});
  const int batch = GENERATE(1, 3, 5);
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  const auto path = GENERATE(GemmPath::vendor, GemmPath::portable);
  INFO("m = " << m << ", n = " << n << ", k = " << k << ", batch " << batch << ", transpose A " << (ta == Trans::yes)
              << ", transpose B " << (tb == Trans::yes) << ", portable " << (path == GemmPath::portable));
  const auto A = ta == Trans::no ? random_matrix<Scalar>(batch * m, k, 1) : random_matrix<Scalar>(batch * k, m, 1);
  const auto B = tb == Trans::no ? random_matrix<Scalar>(batch * k, n, 2) : random_matrix<Scalar>(batch * n, k, 2);
  const auto C0 = random_matrix<Scalar>(batch * m, n, 3);
  const double alpha = 0.75, beta = -0.5;

  const auto C = clone<Scalar>("test::batched", C0);
  gemm_batched(ExecutionSpace(), batch, ta, tb, alpha, A, B, beta, C, path);
  const auto batched = to_host<Scalar>(C);
  // The CBLAS loop and the portable kernel run each block as gemm runs it;
  // cuBLAS' strided-batched kernels are not its single-GEMM ones (H200: other
  // bits even at m = n = k = 1), so there the long-double reference below alone
  // holds the blocks.
  const bool same_kernels = path == GemmPath::portable || !kpipe::test::vendor_gemm_is_cublas();
  for (int block = 0; same_kernels && block < batch; ++block) {
    const auto Ci = block_of(C0, block, batch);
    gemm(ExecutionSpace(), ta, tb, alpha, block_of(A, block, batch), block_of(B, block, batch), beta, Ci, path);
    const auto single = to_host<Scalar>(Ci);
    INFO("block " << block);
    CHECK(std::equal(single.begin(), single.end(), batched.begin() + block * m * n));
  }
  const double tolerance = std::is_same_v<Scalar, float> ? 1e-5 : 1e-12;
  CHECK(relative_error(batched, reference(batch, ta, tb, alpha, A, B, beta, C0)) < tolerance);
}

TEST_CASE("batched GEMM shape errors are input errors that print the shapes", "[kernels][gemm]") {
  const auto A = random_matrix<float>(6, 4, 1);
  const auto B = random_matrix<float>(8, 5, 2);
  auto C = uninitialized_matrix<float>("test::c", 6, 5);
  const auto message = [&](int batch, const Matrix<float>& b) {
    try {
      gemm_batched(ExecutionSpace(), batch, Trans::no, Trans::no, 1.0f, A, b, 0.0f, C);
    } catch (const kpipe::Error& e) {
      CHECK(e.kind() == kpipe::ErrorKind::input);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message(4, B) == "gemm_batched cannot split A (6x4), B (8x5) and C (6x5) into 4 equal row blocks");
  CHECK(message(0, B) == "gemm_batched cannot split A (6x4), B (8x5) and C (6x5) into 0 equal row blocks");
  CHECK(message(2, B) == "no error");
  CHECK(message(2, random_matrix<float>(6, 5, 3)) == "gemm_batched shapes do not fit: 2 blocks of A 3x4, B 3x5, C 3x5");
}

TEMPLATE_TEST_CASE("a batched GEMM on column blocks of wider matrices reads and writes only those columns",
                   "[kernels][gemm]", float, double) {
  using Scalar = TestType;
  // 3 blocks of C (17 x 9) = op(A) (17 x 6) op(B) (6 x 9), as one head of a projection.
  const int batch = 3, m = 17, n = 9, k = 6;
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  const auto path = GENERATE(GemmPath::vendor, GemmPath::portable);
  INFO("transpose A " << (ta == Trans::yes) << ", transpose B " << (tb == Trans::yes) << ", portable "
                      << (path == GemmPath::portable));
  const auto [a_rows, a_cols] = ta == Trans::no ? std::pair{m, k} : std::pair{k, m};
  const auto [b_rows, b_cols] = tb == Trans::no ? std::pair{k, n} : std::pair{n, k};
  const auto A = random_matrix<Scalar>(batch * a_rows, a_cols + 5, 1);
  const auto B = random_matrix<Scalar>(batch * b_rows, b_cols + 2, 2);
  const auto C0 = random_matrix<Scalar>(batch * m, n + 7, 3);
  const double alpha = 0.75, beta = -0.5;

  const auto C = clone<Scalar>("test::wide", C0);
  gemm_batched(ExecutionSpace(), ta, tb, alpha, row_blocks(A, batch, 4, a_cols), row_blocks(B, batch, 1, b_cols), beta,
               row_blocks(C, batch, 3, n), path);
  const auto in_block = columns_of(C, 3, n);
  const auto expected =
      reference(batch, ta, tb, alpha, columns_of(A, 4, a_cols), columns_of(B, 1, b_cols), beta, columns_of(C0, 3, n));
  const double tolerance = std::is_same_v<Scalar, float> ? 1e-5 : 1e-12;
  CHECK(relative_error(to_host<Scalar>(in_block), expected) < tolerance);
  // The columns either side are as they were.
  for (const auto& [first, cols] : {std::pair{0, 3}, std::pair{n + 3, 4}}) {
    CHECK(to_host<Scalar>(columns_of(C, first, cols)) == to_host<Scalar>(columns_of(C0, first, cols)));
  }
}

TEST_CASE("row blocks must lie inside their matrix", "[kernels][gemm]") {
  const auto X = random_matrix<float>(6, 4, 1);
  CHECK(row_blocks(X, 3, 1, 3).extent(0) == 3);
  CHECK(row_blocks(X, 3, 1, 3).extent(1) == 2);
  CHECK(row_blocks(X, 3, 1, 3).stride(0) == 8);
  CHECK_THROWS_AS(row_blocks(X, 4, 0, 4), kpipe::Error);  // 6 rows in 4 blocks
  CHECK_THROWS_AS(row_blocks(X, 2, 2, 3), kpipe::Error);  // columns 2..5 of 4
  CHECK_THROWS_AS(row_blocks(X, 0, 0, 4), kpipe::Error);
}
