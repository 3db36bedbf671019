// Both GEMM paths against each other and against a long-double host product.
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/random.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

using kpipe::test::relative_error;

namespace {

// alpha op(A) op(B) + beta C on the host, in long double.
template <class Scalar>
std::vector<long double> reference(Trans ta, Trans tb, double alpha, const Matrix<Scalar>& A, const Matrix<Scalar>& B,
                                   double beta, const Matrix<Scalar>& C) {
  const auto a = to_host<Scalar>(A);
  const auto b = to_host<Scalar>(B);
  const auto c = to_host<Scalar>(C);
  const std::size_t m = C.extent(0), n = C.extent(1);
  const std::size_t k = ta == Trans::no ? A.extent(1) : A.extent(0);
  const auto op_a = [&](std::size_t i, std::size_t l) { return ta == Trans::no ? a[i * k + l] : a[l * m + i]; };
  const auto op_b = [&](std::size_t l, std::size_t j) { return tb == Trans::no ? b[l * n + j] : b[j * k + l]; };
  std::vector<long double> out(m * n);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      long double sum = 0;
      for (std::size_t l = 0; l < k; ++l) sum += static_cast<long double>(op_a(i, l)) * op_b(l, j);
      out[i * n + j] = alpha * sum + beta * static_cast<long double>(c[i * n + j]);
    }
  }
  return out;
}

template <class Scalar>
constexpr double tolerance() {
  return std::is_same_v<Scalar, float> ? 1e-5 : 1e-12;
}

}  // namespace

TEMPLATE_TEST_CASE("portable GEMM agrees with vendor GEMM for all transpositions and odd shapes", "[kernels][gemm]",
                   float, double) {
  using Scalar = TestType;
  const auto [m, n, k] =
      GENERATE(std::tuple{1, 1, 1}, std::tuple{17, 33, 65}, std::tuple{255, 257, 129}, std::tuple{1024, 64, 512});
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  INFO("m = " << m << ", n = " << n << ", k = " << k << ", transpose A " << (ta == Trans::yes) << ", transpose B "
              << (tb == Trans::yes) << ", vendor " << vendor_gemm_library());
  const auto A = ta == Trans::no ? random_matrix<Scalar>(m, k, 1) : random_matrix<Scalar>(k, m, 1);
  const auto B = tb == Trans::no ? random_matrix<Scalar>(k, n, 2) : random_matrix<Scalar>(n, k, 2);
  const auto C0 = random_matrix<Scalar>(m, n, 3);
  const double alpha = 0.75, beta = -0.5;

  const auto vendor = clone<Scalar>("test::vendor", C0);
  const auto portable = clone<Scalar>("test::portable", C0);
  gemm(ExecutionSpace(), ta, tb, alpha, A, B, beta, vendor, GemmPath::vendor);
  gemm(ExecutionSpace(), ta, tb, alpha, A, B, beta, portable, GemmPath::portable);
  const auto vendor_host = to_host<Scalar>(vendor);
  const auto portable_host = to_host<Scalar>(portable);

  CHECK(relative_error(portable_host, vendor_host) < tolerance<Scalar>());
  const auto truth = reference(ta, tb, alpha, A, B, beta, C0);
  CHECK(relative_error(vendor_host, truth) < tolerance<Scalar>());
  CHECK(relative_error(portable_host, truth) < tolerance<Scalar>());
}

TEMPLATE_TEST_CASE("beta = 0 overwrites C without reading it, and repeated calls are bitwise equal", "[kernels][gemm]",
                   float, double) {
  using Scalar = TestType;
  const auto path = GENERATE(GemmPath::vendor, GemmPath::portable);
  const auto A = random_matrix<Scalar>(40, 70, 4);
  const auto B = random_matrix<Scalar>(70, 90, 5);
  auto first = uninitialized_matrix<Scalar>("test::first", 40, 90);
  auto second = uninitialized_matrix<Scalar>("test::second", 40, 90);
  Kokkos::deep_copy(first, std::numeric_limits<Scalar>::quiet_NaN());
  gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0, A, B, 0.0, first, path);
  gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0, A, B, 0.0, second, path);
  const auto a = to_host<Scalar>(first);
  CHECK(std::all_of(a.begin(), a.end(), [](Scalar x) { return std::isfinite(x); }));
  CHECK(a == to_host<Scalar>(second));
}

TEMPLATE_TEST_CASE("a GEMM's column epilogue gives bitwise what add_row and add_column_sums give after it",
                   "[kernels][gemm]", float, double) {
  using Scalar = TestType;
  const auto path = GENERATE(GemmPath::vendor, GemmPath::portable);
  // 300 columns: slices of a threaded build's split that do not fall on the
  // column sums' 64-column blocks.
  const int n = GENERATE(1, 63, 300);
  INFO("n = " << n << ", vendor " << vendor_gemm_library());
  const int m = 37, k = 29;
  const ExecutionSpace space;
  const auto X = random_matrix<Scalar>(m, k, 11);
  const auto W = random_matrix<Scalar>(k, n, 12);
  const auto bias = random_matrix<Scalar>(1, n, 13);
  const auto dY = random_matrix<Scalar>(m, n, 14);
  const auto sums0 = random_matrix<Scalar>(1, n, 15);
  const auto dW0 = random_matrix<Scalar>(k, n, 16);

  // A Linear's forward: Y = X W + bias.
  const auto fused_y = zero_matrix<Scalar>("test::fused_y", m, n);
  const auto separate_y = zero_matrix<Scalar>("test::separate_y", m, n);
  gemm(space, Trans::no, Trans::no, 1.0, X, W, 0.0, fused_y, ColumnEpilogue<Scalar>{bias, {}, {}}, path);
  gemm(space, Trans::no, Trans::no, 1.0, X, W, 0.0, separate_y, path);
  add_row(space, bias, separate_y);
  CHECK(to_host<Scalar>(fused_y) == to_host<Scalar>(separate_y));

  // Its weight gradient: dW += X^T dY, bias gradient += dY's column sums.
  const auto fused_dw = clone<Scalar>("test::fused_dw", dW0);
  const auto separate_dw = clone<Scalar>("test::separate_dw", dW0);
  const auto fused_sums = clone<Scalar>("test::fused_sums", sums0);
  const auto separate_sums = clone<Scalar>("test::separate_sums", sums0);
  gemm(space, Trans::yes, Trans::no, 1.0, X, dY, 1.0, fused_dw, ColumnEpilogue<Scalar>{{}, dY, fused_sums}, path);
  gemm(space, Trans::yes, Trans::no, 1.0, X, dY, 1.0, separate_dw, path);
  add_column_sums(space, dY, separate_sums);
  space.fence();
  CHECK(to_host<Scalar>(fused_dw) == to_host<Scalar>(separate_dw));
  const auto sums = to_host<Scalar>(fused_sums);
  CHECK(sums == to_host<Scalar>(separate_sums));
  // And the sums are the column sums, taken in ascending rows from zero.
  const auto dy = to_host<Scalar>(dY);
  const auto start = to_host<Scalar>(sums0);
  for (int j = 0; j < n; ++j) {
    Scalar sum = 0;
    for (int i = 0; i < m; ++i) sum += dy[static_cast<std::size_t>(i) * n + j];
    REQUIRE(sums[j] == start[j] + sum);
  }
}

TEST_CASE("GEMM shape mismatches are input errors that print every shape", "[kernels][gemm]") {
  const auto A = random_matrix<float>(3, 4, 6);
  const auto B = random_matrix<float>(5, 6, 7);
  auto C = uninitialized_matrix<float>("test::c", 3, 6);
  CHECK(kpipe::test::input_error_of([&] { gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0f, A, B, 0.0f, C); }) ==
        "gemm shapes do not fit: A is 3x4, B is 5x6, C is 3x6");
  const auto B46 = random_matrix<float>(4, 6, 8);
  const auto bias = random_matrix<float>(1, 5, 9);
  CHECK(kpipe::test::input_error_of([&] {
          gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0f, A, B46, 0.0f, C, ColumnEpilogue<float>{bias, {}, {}});
        }).find("epilogue bias") != std::string::npos);
}

namespace {
volatile std::sig_atomic_t timer_signals = 0;
extern "C" void count_timer_signal(int) { timer_signals = timer_signals + 1; }
}  // namespace

// A preemption signal may arrive in the middle of any GEMM. oneDNN 2.6.3's
// dnnl::sgemm corrupted the heap when one did (the Slurm preemption tests
// aborted in free()); the vendor path and the packed weight gradient must
// come out of thousands of signals with exact results and an intact heap.
TEST_CASE("GEMMs survive signals arriving mid-call", "[kernels][gemm]") {
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = count_timer_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  REQUIRE(::sigaction(SIGALRM, &action, &previous) == 0);
  // Ones and twos: every path's sums are exact, whatever their order.
  const auto X = zero_matrix<float>("X", 32, 256);
  const auto W = zero_matrix<float>("W", 256, 256);
  const auto Y = zero_matrix<float>("Y", 32, 256);
  const auto dW = zero_matrix<float>("dW", 256, 256);
  Kokkos::deep_copy(X, 1.0f);
  Kokkos::deep_copy(W, 2.0f);
  PackedWeight<float> packed;
  const itimerval every_200us{{0, 200}, {0, 200}};
  const itimerval off{};
  timer_signals = 0;
  ::setitimer(ITIMER_REAL, &every_200us, nullptr);
  constexpr int calls = 1000;
  for (int i = 0; i < calls; ++i) {
    gemm<float>(ExecutionSpace(), Trans::no, Trans::no, 1, X, W, 0, Y, GemmPath::vendor);
    packed.weight_gradient(ExecutionSpace(), X, Y, dW);  // dW += Xᵀ Y
  }
  ExecutionSpace().fence();
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &previous, nullptr);
  const auto y = to_host<float>(Y);
  const auto dw = to_host<float>(dW);
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 512.0f; }));
  // Each call adds 32 · 512 to every entry: 16,384,000 after 1000, exact in float32.
  CHECK(std::all_of(dw.begin(), dw.end(), [](float v) { return v == 32.0f * 512.0f * calls; }));
  CHECK(timer_signals > 0);
}
