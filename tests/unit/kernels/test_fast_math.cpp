// The float approximations of fast_math and the float activations built on them,
// against double references over dense ranges. The bounds are the measured
// maxima rounded up; glibc's float functions are within about 1e-7 of the same
// references.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/detail/fast_math.hpp"
#include "kpipe/kernels/elementwise.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

namespace {

// Every float step of 2^-14 in [-10, 10]: 327,681 points.
std::vector<float> dense_range() {
  std::vector<float> x;
  for (int i = -10 * 16384; i <= 10 * 16384; ++i) x.push_back(static_cast<float>(i) / 16384.0f);
  return x;
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double gelu_derivative(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * normal_pdf(x); }
double tanh_derivative(double x) { return 1 - std::tanh(x) * std::tanh(x); }
// GPT-2's GELU and its derivative, written from the formula.
double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_tanh_derivative(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * (1 + std::tanh(u)) + 0.5 * x * tanh_derivative(u) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

// Largest |approximation - reference| / max(1, |reference|) over x.
template <class Approximation, class Reference>
double max_error(const std::vector<float>& x, Approximation approximation, Reference reference) {
  double error = 0;
  for (const float xe : x) {
    const double exact = reference(static_cast<double>(xe));
    error = std::max(error, std::abs(approximation(xe) - exact) / std::max(1.0, std::abs(exact)));
  }
  return error;
}

}  // namespace

TEST_CASE("float erf, tanh, exp and sqrt are within a few ulp of double", "[kernels][fast_math]") {
  const auto x = dense_range();
  CHECK(max_error(
            x, [](float v) { return fast_math::erf(v); }, [](double v) { return std::erf(v); }) < 5e-7);
  CHECK(max_error(
            x, [](float v) { return fast_math::tanh(v); }, [](double v) { return std::tanh(v); }) < 5e-7);
  CHECK(max_error(
            x, [](float v) { return fast_math::normal_pdf(v); }, [](double v) { return normal_pdf(v); }) < 1e-7);
  // Relative errors where the value is small: exp over [-87, 87] (where it clamps),
  // tanh near 0, sqrt over the normal numbers.
  // normal_pdf over |x| <= 4, down to 3e-4 (its argument's rounding dominates, as in exp).
  double exp_error = 0, tanh_error = 0, sqrt_error = 0, pdf_error = 0;
  for (float v = -87.0f; v <= 87.0f; v += 1.0f / 1024) {
    exp_error = std::max(exp_error, std::abs(fast_math::exp(v) / std::exp(double(v)) - 1));
  }
  for (float v = -4.0f; v <= 4.0f; v += 1.0f / 4096) {
    pdf_error = std::max(pdf_error, std::abs(fast_math::normal_pdf(v) / normal_pdf(v) - 1));
  }
  for (float v = 1e-30f; v < 1.0f; v *= 1.001f) {
    tanh_error = std::max(tanh_error, std::abs(fast_math::tanh(v) / std::tanh(double(v)) - 1));
  }
  for (float v = std::numeric_limits<float>::min(); v < 1e38f; v *= 1.0001f) {
    sqrt_error = std::max(sqrt_error, std::abs(fast_math::sqrt(v) / std::sqrt(double(v)) - 1));
  }
  // sech^2 relative to itself over |x| <= 43, where it falls to 1e-37: the
  // few-ulp error of exp(-2|x|), not 1 - tanh^2's cancellation.
  double sech_squared_error = 0;
  for (float v = -43.0f; v <= 43.0f; v += 1.0f / 1024) {
    const double exact = 1 / (std::cosh(double(v)) * std::cosh(double(v)));
    sech_squared_error = std::max(sech_squared_error, std::abs(fast_math::sech_squared(v) / exact - 1));
  }
  CHECK(exp_error < 1.5e-7);
  CHECK(sech_squared_error < 5e-7);
  CHECK(tanh_error < 5e-7);
  CHECK(sqrt_error < 1.5e-7);
  CHECK(pdf_error < 1e-6);
}

TEST_CASE("float log and sin and cos in turns are within 1e-7 of double, at every uniform of the normal samples",
          "[kernels][fast_math]") {
  // fill_normal's uniforms are k 2^-24, k = 1 .. 2^24: all of them. glibc's
  // logf is within 7.7e-8 (relative) here, and sinf(2 pi u) within 4.1e-7 of
  // sin(2 pi u): the rounding of its argument, which turns avoid.
  double log_error = 0, sin_error = 0, cos_error = 0;
  for (int k = 1; k <= 1 << 24; ++k) {
    const float u = static_cast<float>(k) * 0x1.0p-24f;
    const double exact = std::log(double(u));
    log_error =
        std::max(log_error, k == 1 << 24 ? std::abs(fast_math::log(u)) : std::abs(fast_math::log(u) / exact - 1));
    float sine, cosine;
    fast_math::sincos_turns(u, sine, cosine);
    sin_error = std::max(sin_error, std::abs(sine - std::sin(2 * M_PI * double(u))));
    cos_error = std::max(cos_error, std::abs(cosine - std::cos(2 * M_PI * double(u))));
  }
  CHECK(log_error < 1e-7);
  CHECK(sin_error < 1e-7);
  CHECK(cos_error < 1e-7);
  // Normal floats 0.01% apart, and turns of either sign up to 256.
  double wide_log_error = 0, wide_turns_error = 0;
  for (float v = std::numeric_limits<float>::min(); v < 3e38f; v *= 1.0001f) {
    const double exact = std::log(double(v));
    wide_log_error = std::max(wide_log_error, std::abs(fast_math::log(v) - exact) / std::max(1.0, std::abs(exact)));
  }
  for (int k = -(1 << 20); k < 1 << 20; ++k) {
    const float t = static_cast<float>(k) * 0x1.0p-12f;
    float sine, cosine;
    fast_math::sincos_turns(t, sine, cosine);
    wide_turns_error = std::max({wide_turns_error, std::abs(sine - std::sin(2 * M_PI * double(t))),
                                 std::abs(cosine - std::cos(2 * M_PI * double(t)))});
  }
  CHECK(wide_log_error < 1e-7);
  CHECK(wide_turns_error < 1e-7);
}

TEST_CASE("float erf, tanh and exp saturate and pass NaN through", "[kernels][fast_math]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(fast_math::erf(inf) == Approx(1.0).margin(1e-7));
  CHECK(fast_math::erf(-1e30f) == Approx(-1.0).margin(1e-7));
  CHECK(fast_math::tanh(-inf) == Approx(-1.0).margin(1e-7));
  CHECK(fast_math::tanh(1e30f) == Approx(1.0).margin(1e-7));
  // Below -87 exp is 0 (as expf where subnormals flush to zero), not its clamp's 1.6e-38.
  CHECK(fast_math::exp(-inf) == 0.0f);
  CHECK(fast_math::exp(-1e4f) == 0.0f);
  CHECK(fast_math::exp(-86.9f) > 0.0f);
  CHECK(fast_math::sech_squared(-inf) == 0.0f);
  CHECK(fast_math::sech_squared(0.0f) == 1.0f);
  CHECK(fast_math::sqrt(0.0f) == 0.0f);
  // -0 (Box-Muller's -2 log(1)) is -0, without the signed overflow its bits would give.
  CHECK(fast_math::sqrt(-0.0f) == 0.0f);
  CHECK(std::signbit(fast_math::sqrt(-0.0f)));
  CHECK(std::isnan(fast_math::erf(std::nanf(""))));
  CHECK(std::isnan(fast_math::tanh(std::nanf(""))));
  CHECK(std::isnan(fast_math::exp(std::nanf(""))));
  CHECK(std::isnan(fast_math::sech_squared(std::nanf(""))));
  CHECK(fast_math::normal_pdf(inf) == Approx(0.0).margin(1e-37));
  CHECK(std::isnan(fast_math::normal_pdf(std::nanf(""))));
}

TEST_CASE("float GELU and tanh kernels follow the double formulas", "[kernels][fast_math]") {
  const auto [f, value, derivative, value_bound, derivative_bound] =
      GENERATE(std::tuple{Activation::gelu, &gelu, &gelu_derivative, 1.5e-6, 1.5e-6},
               // The derivatives take 1 - tanh^2 as sech^2 from exp, not from the rounded tanh,
               // whose error x^3 would amplify (4e-6 here; 2.7e-5 where FMAs round the fit, on CUDA).
               std::tuple{Activation::gelu_tanh, &gelu_tanh, &gelu_tanh_derivative, 1.5e-6, 1e-6},
               std::tuple{Activation::tanh, static_cast<double (*)(double)>(&std::tanh), &tanh_derivative, 5e-7, 5e-7});
  const auto x = dense_range();
  const int n = static_cast<int>(x.size());
  auto X = uninitialized_matrix<float>("test::x", 1, n);
  auto Y = uninitialized_matrix<float>("test::y", 1, n);
  auto D = uninitialized_matrix<float>("test::d", 1, n);
  from_host<float>(x, X);
  auto inference = uninitialized_matrix<float>("test::inference", 1, n);
  activation_forward(ExecutionSpace(), f, X, Y, D);
  activation_forward(ExecutionSpace(), f, X, inference);
  const auto y = to_host<float>(Y);
  const auto dx = to_host<float>(D);
  CHECK(to_host<float>(inference) == y);
  double value_error = 0, derivative_error = 0;
  for (int e = 0; e < n; ++e) {
    const double exact = value(x[e]);
    const double slope = derivative(x[e]);
    value_error = std::max(value_error, std::abs(y[e] - exact) / std::max(1.0, std::abs(exact)));
    derivative_error = std::max(derivative_error, std::abs(dx[e] - slope) / std::max(1.0, std::abs(slope)));
  }
  CHECK(value_error < value_bound);
  CHECK(derivative_error < derivative_bound);
}
