// compute.precision = bf16 and fp16: the mixed-precision GEMM (bfloat16 or
// float16 operands, float32 sums) on every path against a float64 product of
// the same operands, the error bound of reduced operands against float32
// ones, and the conversions (float16's against the compiler's _Float16).
//
// The bounds (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1,
// u = 2^-24 the float32 unit roundoff): a product of two bfloat16 (8
// significant bits) or two float16 (11) is exact in float32, so a path that
// sums k of them in float32 in any order, scales by alpha and adds beta C is
// within (k + 2) u (|alpha| sum |a||b| + |beta||c|) of the exact value.
// Rounding normal float32 operands to the reduced type (unit roundoff r:
// 2^-9 for bfloat16, 2^-11 for float16) moves each product by at most
// (2r + r^2) |a||b| more.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/precision.hpp"
#include "random_matrix.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

namespace {

constexpr double u = 0x1p-24;

// The unit roundoff of each reduced type.
template <class Reduced>
constexpr double roundoff = std::is_same_v<Reduced, BFloat16> ? 0x1p-9 : 0x1p-11;

template <class Reduced>
Matrix<Reduced> rounded(const Matrix<float>& X) {
  auto Y = uninitialized_matrix<Reduced>("test::reduced", X.extent_int(0), X.extent_int(1));
  round_to(ExecutionSpace(), X, Y);
  ExecutionSpace().fence();
  return Y;
}

template <class Reduced>
std::vector<double> widened_to_host(const Matrix<Reduced>& X) {
  auto wide = uninitialized_matrix<float>("test::wide", X.extent_int(0), X.extent_int(1));
  widen(ExecutionSpace(), X, wide);
  const auto values = to_host<float>(wide);
  return {values.begin(), values.end()};
}

struct Exact {
  std::vector<double> value;  // alpha op(A) op(B) + beta C in float64 (exact for these operands up to 2^-53)
  std::vector<double> scale;  // |alpha| sum |a||b| + |beta||c|, what the bound multiplies
};

// alpha op(A) op(B) + beta C for row-major a (rows_a x cols_a), b and c.
Exact exact(Trans ta, Trans tb, int m, int n, int k, double alpha, const std::vector<double>& a,
            const std::vector<double>& b, double beta, const std::vector<float>& c) {
  const auto op_a = [&](int i, int l) { return ta == Trans::no ? a[i * k + l] : a[l * m + i]; };
  const auto op_b = [&](int l, int j) { return tb == Trans::no ? b[l * n + j] : b[j * k + l]; };
  Exact out{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int l = 0; l < k; ++l) {
        sum += op_a(i, l) * op_b(l, j);
        magnitude += std::abs(op_a(i, l) * op_b(l, j));
      }
      out.value[i * n + j] = alpha * sum + beta * c[i * n + j];
      out.scale[i * n + j] = std::abs(alpha) * magnitude + std::abs(beta) * std::abs(c[i * n + j]);
    }
  }
  return out;
}

// The largest |got - exact| / scale over the entries.
double worst_ratio(const std::vector<float>& got, const Exact& truth) {
  double worst = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double error = std::abs(got[e] - truth.value[e]);
    worst = std::max(worst, truth.scale[e] == 0 ? error : error / truth.scale[e]);
  }
  return worst;
}

}  // namespace

TEMPLATE_TEST_CASE("mixed-precision GEMM on every path is within float32 summation error of a float64 product",
                   "[kernels][gemm][bf16][fp16]", BFloat16, Half) {
  // The Linear shapes of the decks (32 and 64 rows by 128 to 512 wide) and odd edges.
  const auto [m, n, k] = GENERATE(std::tuple{1, 1, 1}, std::tuple{17, 33, 65}, std::tuple{32, 512, 128},
                                  std::tuple{64, 256, 256}, std::tuple{128, 96, 1000}, std::tuple{5, 4, 0});
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  const auto [alpha, beta] = GENERATE(std::pair{1.0f, 0.0f}, std::pair{1.0f, 1.0f}, std::pair{-0.5f, 2.0f});
  const auto path = GENERATE(GemmPath::portable, GemmPath::vendor);
  INFO("m = " << m << ", n = " << n << ", k = " << k << ", transposed A " << (ta == Trans::yes) << ", B "
              << (tb == Trans::yes) << ", alpha " << alpha << ", beta " << beta << ", "
              << (path == GemmPath::portable ? "portable" : mixed_gemm_library(dtype_of<TestType>())));
  const auto A = rounded<TestType>(ta == Trans::no ? random_matrix<float>(m, k, 1) : random_matrix<float>(k, m, 1));
  const auto B = rounded<TestType>(tb == Trans::no ? random_matrix<float>(k, n, 2) : random_matrix<float>(n, k, 2));
  const auto C = random_matrix<float>(m, n, 3);
  const auto c = to_host<float>(C);

  gemm_mixed(ExecutionSpace(), ta, tb, alpha, A, B, beta, C, path);
  ExecutionSpace().fence();
  const Exact truth = exact(ta, tb, m, n, k, alpha, widened_to_host(A), widened_to_host(B), beta, c);
  CHECK(worst_ratio(to_host<float>(C), truth) <= (k + 2) * u);
}

// Attention's products under compute.precision: batches of strided blocks
// (one head's columns of every sequence of a wider projection, C blocks
// inside a wider matrix too), each block against its own float64 product.
TEMPLATE_TEST_CASE("batched mixed-precision GEMM of strided blocks is within float32 summation error on every path",
                   "[kernels][gemm][bf16][fp16]", BFloat16, Half) {
  const int batch = 3, m = 33, n = 17, k = 8;
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  const auto path = GENERATE(GemmPath::portable, GemmPath::vendor);
  const float alpha = -0.5f, beta = 1.0f;
  INFO("transposed A " << (ta == Trans::yes) << ", B " << (tb == Trans::yes) << ", "
                       << (path == GemmPath::portable ? "portable" : mixed_gemm_library(dtype_of<TestType>())));
  // Stored blocks of op(X) = rows x cols: X's rows x cols, or cols x rows transposed.
  const auto stored = [](Trans t, int rows, int cols) {
    return t == Trans::no ? std::pair{rows, cols} : std::pair{cols, rows};
  };
  const auto [ra, ca] = stored(ta, m, k);
  const auto [rb, cb] = stored(tb, k, n);
  const auto A = rounded<TestType>(random_matrix<float>(batch * ra, ca + 7, 4));
  const auto B = rounded<TestType>(random_matrix<float>(batch * rb, cb + 2, 5));
  const auto C = random_matrix<float>(batch * m, n + 5, 6);
  const auto a = widened_to_host(A), b = widened_to_host(B);
  const auto c = to_host<float>(C);
  const ConstMatrix<TestType> A_read = A, B_read = B;
  gemm_batched_mixed(ExecutionSpace(), ta, tb, alpha, row_blocks(A_read, batch, 3, ca),
                     row_blocks(B_read, batch, 1, cb), beta, row_blocks(C, batch, 2, n), path);
  ExecutionSpace().fence();
  const auto got = to_host<float>(C);
  // Block i of a row-major matrix `values` of width `ld`, columns [first, first + cols).
  const auto block = [](const auto& values, int ld, int i, int rows, int first, int cols) {
    std::vector<typename std::decay_t<decltype(values)>::value_type> out;
    for (int r = 0; r < rows; ++r) {
      const auto row = values.begin() + static_cast<std::ptrdiff_t>(i * rows + r) * ld + first;
      out.insert(out.end(), row, row + cols);
    }
    return out;
  };
  for (int i = 0; i < batch; ++i) {
    INFO("block " << i);
    const Exact truth = exact(ta, tb, m, n, k, alpha, block(a, ca + 7, i, ra, 3, ca), block(b, cb + 2, i, rb, 1, cb),
                              beta, block(c, n + 5, i, m, 2, n));
    CHECK(worst_ratio(block(got, n + 5, i, m, 2, n), truth) <= (k + 2) * u);
  }
  // Columns of C outside the blocks are untouched.
  for (int row = 0; row < batch * m; ++row) {
    for (int col : {0, 1, n + 2, n + 3, n + 4}) CHECK(got[row * (n + 5) + col] == c[row * (n + 5) + col]);
  }
}

// The Linear's two products by W on the packed path (oneDNN on W packed in
// bfloat16 where the build has it, gemm_mixed otherwise): the same bound, with
// the bias added in float32 after the sum. fp16 has no packed path.
TEST_CASE("packed bf16 products by W and W^T are within float32 summation error", "[kernels][gemm][bf16]") {
  const auto [m, k, n] = GENERATE(std::tuple{32, 512, 512}, std::tuple{17, 65, 33});
  const auto A = rounded<BFloat16>(random_matrix<float>(m, k, 10));
  const auto W = rounded<BFloat16>(random_matrix<float>(k, n, 11));
  const auto dY = rounded<BFloat16>(random_matrix<float>(m, n, 12));
  const auto bias = random_matrix<float>(1, n, 13);
  auto Y = zero_matrix<float>("test::Y", m, n);
  auto dX = zero_matrix<float>("test::dX", m, k);
  PackedWeight<float> packed;
  INFO(packed_gemm_library());
  packed.linear_forward(ExecutionSpace(), A, W, bias, Y);
  packed.input_gradient(ExecutionSpace(), dY, W, dX);
  ExecutionSpace().fence();

  const auto b = to_host<float>(bias);
  Exact forward =
      exact(Trans::no, Trans::no, m, n, k, 1, widened_to_host(A), widened_to_host(W), 0, std::vector<float>(m * n));
  for (int e = 0; e < m * n; ++e) {
    forward.value[e] += b[e % n];
    forward.scale[e] += std::abs(b[e % n]);
  }
  CHECK(worst_ratio(to_host<float>(Y), forward) <= (k + 2) * u);
  const Exact backward =
      exact(Trans::no, Trans::yes, m, k, n, 1, widened_to_host(dY), widened_to_host(W), 0, std::vector<float>(m * k));
  CHECK(worst_ratio(to_host<float>(dX), backward) <= (n + 2) * u);
}

TEMPLATE_TEST_CASE("mixed-precision GEMM of float32 operands is within the rounding bound of the type",
                   "[kernels][gemm][bf16][fp16]", BFloat16, Half) {
  constexpr int m = 32, n = 256, k = 512;
  constexpr double r = roundoff<TestType>;
  // Operands of magnitude 1/2 to 1 (random signs would let float16 meet its
  // subnormals, below 2^-14, whose spacing is absolute, not relative).
  const auto A = random_matrix<float>(m, k, 4, 0.5, 1), B = random_matrix<float>(k, n, 5, 0.5, 1);
  auto C = zero_matrix<float>("test::C", m, n);
  gemm_mixed(ExecutionSpace(), Trans::no, Trans::no, 1, rounded<TestType>(A), rounded<TestType>(B), 0, C);
  ExecutionSpace().fence();
  const auto a = to_host<float>(A), b = to_host<float>(B);
  const Exact truth =
      exact(Trans::no, Trans::no, m, n, k, 1, {a.begin(), a.end()}, {b.begin(), b.end()}, 0, std::vector<float>(m * n));
  const double ratio = worst_ratio(to_host<float>(C), truth);
  CHECK(ratio <= 2 * r + r * r + (k + 2) * u);
  // And the reduced type is not float32 in disguise: the rounding shows.
  CHECK(ratio > (k + 2) * u);
}

TEST_CASE("bfloat16 conversions round to nearest even and widen exactly", "[kernels][bf16]") {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even, 1. 1 + 3·2^-8 ties up to 1 + 2^-6.
  const std::vector<float> values{1.0f, 1.0f + 0x1p-8f, 1.0f + 0x1.8p-7f, -2.5f, 3.4e38f, 1e-40f, NAN, INFINITY};
  const std::vector<float> expected{1.0f, 1.0f, 1.0f + 0x1p-6f, -2.5f, INFINITY, 1e-40f, NAN, INFINITY};
  auto X = uninitialized_matrix<float>("test::X", 1, static_cast<int>(values.size()));
  Kokkos::deep_copy(X, HostRows<float>(const_cast<float*>(values.data()), 1, values.size()));
  auto wide = uninitialized_matrix<float>("test::wide", 1, static_cast<int>(values.size()));
  widen(ExecutionSpace(), rounded<BFloat16>(X), wide);
  const auto back = to_host<float>(wide);
  for (std::size_t e = 0; e < values.size(); ++e) {
    INFO(values[e]);
    if (std::isnan(expected[e])) {
      CHECK(std::isnan(back[e]));
    } else if (e == 5) {
      // A subnormal keeps its top 7 bits. Its value is read from its bits:
      // float arithmetic, a conversion to double included, reads it as 0
      // (subnormals are flushed, tensor/float_environment.hpp).
      std::uint32_t bits = 0;
      std::memcpy(&bits, &back[e], sizeof bits);
      CHECK(std::abs(std::ldexp(static_cast<double>(bits & 0x7fffffu), -149) - 1e-40) <= 0x1p-134);
    } else {
      CHECK(back[e] == expected[e]);
    }
  }
}

// float16 against the compiler's own binary16 (GCC and Clang on x86-64 and
// AArch64 have _Float16): every one of the 65,536 values widens as it does,
// and float32 values across float16's whole range, its subnormals, the ties
// and overflow to infinity round as it rounds them.
#if defined(__FLT16_MAX__)
TEST_CASE("float16 conversions are the compiler's _Float16 conversions", "[kernels][fp16]") {
  const auto bits_of = [](auto value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof value);
    return bits;
  };
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    _Float16 reference;
    const auto half_bits = static_cast<std::uint16_t>(h);
    std::memcpy(&reference, &half_bits, sizeof reference);
    const float expected = static_cast<float>(reference);
    const float got = to_float(Half{half_bits});
    INFO("float16 bits " << h);
    if (std::isnan(expected)) {
      CHECK(std::isnan(got));
    } else {
      REQUIRE(bits_of(got) == bits_of(expected));
    }
  }
  // Every float32 bit pattern with its low 11 bits fixed to each of the
  // values that decide rounding (ties, just below, just above), across all
  // exponents: float16's range and well beyond it on both sides.
  for (std::uint32_t high = 0; high < (1u << 21); ++high) {
    for (const std::uint32_t low : {0x000u, 0x3ffu, 0x400u, 0x401u, 0x7ffu}) {
      const std::uint32_t bits = (high << 11) | low;
      float value = 0;
      std::memcpy(&value, &bits, sizeof value);
      if (std::isnan(value)) continue;
      const auto reference = static_cast<_Float16>(value);
      std::uint16_t expected = 0;
      std::memcpy(&expected, &reference, sizeof expected);
      if (to_half(value).bits != expected) {
        INFO("float32 bits " << bits);
        REQUIRE(to_half(value).bits == expected);
      }
    }
  }
  CHECK(std::isnan(to_float(to_half(NAN))));
}
#endif

TEST_CASE("float16 rounds to nearest even, into its subnormals and up to infinity", "[kernels][fp16]") {
  // Published binary16 encodings: 1 = 0x3c00, 65504 = 0x7bff (largest
  // finite), 2^-14 = 0x0400 (smallest normal), 2^-24 = 0x0001 (smallest subnormal).
  CHECK(to_half(1.0f).bits == 0x3c00u);
  CHECK(to_half(-2.0f).bits == 0xc000u);
  CHECK(to_half(65504.0f).bits == 0x7bffu);
  CHECK(to_half(65519.0f).bits == 0x7bffu);  // below the tie with 65536
  CHECK(to_half(65520.0f).bits == 0x7c00u);  // the tie rounds to even: infinity
  CHECK(to_half(0x1p-14f).bits == 0x0400u);
  CHECK(to_half(0x1p-24f).bits == 0x0001u);
  CHECK(to_half(0x1p-25f).bits == 0x0000u);         // a tie with 0: to even
  CHECK(to_half(0x1.8p-25f).bits == 0x0001u);       // above the tie
  CHECK(to_half(1.0f + 0x1p-11f).bits == 0x3c00u);  // a tie: to even (1)
  CHECK(to_half(1.0f + 0x1.8p-10f).bits == 0x3c02u);
  CHECK(to_half(-0.0f).bits == 0x8000u);
  CHECK(to_half(INFINITY).bits == 0x7c00u);
  CHECK(to_float(Half{0x0001u}) == 0x1p-24f);
  CHECK(to_float(Half{0x7bffu}) == 65504.0f);
}

TEMPLATE_TEST_CASE("reduced-precision column sums add rows in float32", "[kernels][bf16][fp16]", BFloat16, Half) {
  const auto X = random_matrix<float>(37, 70, 6);
  const auto X16 = rounded<TestType>(X);
  auto sums = random_matrix<float>(1, 70, 7);
  const auto before = to_host<float>(sums);
  add_column_sums(ExecutionSpace(), X16, sums);
  ExecutionSpace().fence();
  const auto x = widened_to_host(X16);
  const auto got = to_host<float>(sums);
  for (int j = 0; j < 70; ++j) {
    float sum = 0;  // ascending rows in float32, then added: the kernel's order
    for (int i = 0; i < 37; ++i) sum += static_cast<float>(x[i * 70 + j]);
    CHECK(got[j] == before[j] + sum);
  }
}

TEMPLATE_TEST_CASE("mixed-precision GEMM shapes that do not fit are an input error", "[kernels][gemm][bf16][fp16]",
                   BFloat16, Half) {
  const auto A = rounded<TestType>(random_matrix<float>(4, 5, 8)), B = rounded<TestType>(random_matrix<float>(6, 3, 9));
  auto C = zero_matrix<float>("test::C", 4, 3);
  const std::string message =
      kpipe::test::input_error_of([&] { gemm_mixed(ExecutionSpace(), Trans::no, Trans::no, 1, A, B, 0, C); });
  CHECK(message.find("gemm_mixed shapes do not fit") != std::string::npos);
}
