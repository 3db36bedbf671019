#pragma once
// Math for the elementwise kernels. The float overloads are short branch-free
// approximations that the compiler vectorizes: glibc's scalar erff, tanhf,
// expf and (without -fno-math-errno) sqrtf made GELU, tanh and AdamW
// compute-bound on a host core, and logf, sinf and cosf the normal samples.
// The double overloads forward to the accurate library functions, which the
// double finite-difference checks need. Errors against double references:
// tests/unit/kernels/test_fast_math.cpp.

#include <cstdint>
#include <cstring>

#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels::fast_math {

namespace detail {

KOKKOS_INLINE_FUNCTION float from_bits(std::int32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
KOKKOS_INLINE_FUNCTION std::int32_t to_bits(float x) {
  std::int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// x with its magnitude clamped to limit (> 0), NaN kept. Done on the
// bits, which order like the magnitudes: a float select here would let GCC
// duplicate the division after it into both branches, which then does not
// vectorize under -ftrapping-math.
KOKKOS_INLINE_FUNCTION float clamp_magnitude(float x, float limit) {
  const std::int32_t bits = to_bits(x);
  const std::int32_t magnitude = bits & 0x7fffffff;
  const std::int32_t clamped = magnitude > 0x7f800000 ? magnitude : tensor::compat::min(magnitude, to_bits(limit));
  return from_bits((bits & static_cast<std::int32_t>(0x80000000u)) | clamped);
}

// Adding 1.5 * 2^23 to a float of magnitude below 2^22 rounds it to an
// integer n (no floor call) and leaves n in the low mantissa bits of the sum
// (no float-to-int conversion, undefined for NaN).
constexpr float round_shifter = 12582912.0f;

// 2^n for shifted = n + round_shifter, built from its bits; n in [-126, 127].
KOKKOS_INLINE_FUNCTION float power_of_two(float shifted) {
  const auto n_bits = static_cast<std::uint32_t>(to_bits(shifted) - to_bits(round_shifter));
  return from_bits(static_cast<std::int32_t>((n_bits + 127u) << 23));
}

}  // namespace detail

// Rational minimax fit x P(x^2) / Q(x^2) on [-4, 4]; beyond, erff rounds to +-1.
KOKKOS_INLINE_FUNCTION float erf(float a) {
  const float x = detail::clamp_magnitude(a, 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

// Rational fit x P(x^2) / Q(x^2) on [-7.9, 7.9]; beyond, tanhf rounds to +-1.
KOKKOS_INLINE_FUNCTION float tanh(float a) {
  const float x = detail::clamp_magnitude(a, 7.90531110763549805f);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}

// Cephes expf: exp(a) = 2^n exp(r) with |r| <= ln(2)/2, 2^n built from its
// bits. Below -87 it is 0, as expf is where kpipe flushes subnormals to zero
// (the clamp alone would leave 1.6e-38 there: a probability of 1e-38 instead
// of none for a logit 10,000 below the largest).
KOKKOS_INLINE_FUNCTION float exp(float a) {
  const float x = detail::clamp_magnitude(a, 87.0f);
  const float t = x * 1.44269504088896341f + detail::round_shifter;
  const float n = t - detail::round_shifter;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float exp_r = p * r * r + r + 1.0f;
  return a < -87.0f ? 0.0f : exp_r * detail::power_of_two(t);
}

// 1 - tanh(x)^2 as 4e / (1 + e)^2 with e = exp(-2|x|): accurate relative to
// itself where tanh saturates, which 1 - t^2 from a rounded t is not. The
// GELU-tanh derivative multiplies it by up to 58 at |x| = 10, where tanh's fit
// evaluated with fused multiply-adds (as nvcc compiles it) stops 4 ulps short
// of 1: an error of 2.7e-5 from the difference, 1e-7 from this.
KOKKOS_INLINE_FUNCTION float sech_squared(float x) {
  const float e = exp(-2.0f * detail::from_bits(detail::to_bits(x) & 0x7fffffff));
  const float d = 1.0f + e;
  return 4.0f * e / (d * d);
}

// The standard normal density exp(-x^2 / 2) / sqrt(2 pi), for the GELU
// derivative, in two thirds of the operations of exp: 2^t, t = -x^2 log2(e) / 2,
// split as 2^n 2^f with |f| <= 1/2 and a degree-5 fit of 2^f / sqrt(2 pi)
// (relative error 7.5e-8). One reduction step instead of exp's two, and a
// float compare for the clamp: the rounding of t itself (from x^2) dominates
// the error where the density is small. t is clamped at -126, where the
// density is below 1e-38, to keep 2^n a normal float.
KOKKOS_INLINE_FUNCTION float normal_pdf(float x) {
  const float t_raw = x * x * -0.721347520444481703680f;
  const float t = t_raw < -126.0f ? -126.0f : t_raw;  // NaN stays NaN
  const float k = t + detail::round_shifter;
  const float n = k - detail::round_shifter;
  const float f = t - n;
  float p = 5.296546150930226e-4f;
  p = p * f + 3.859982592985034e-3f;
  p = p * f + 2.2144142538309097e-2f;
  p = p * f + 9.583438932895660e-2f;
  p = p * f + 2.765256464481354e-1f;
  p = p * f + 3.9894232153892517e-1f;
  return p * detail::power_of_two(k);
}

// sqrt from the bit-trick reciprocal square root y, two Newton steps on it and
// one on the root s = v·y: within an ulp for normal v >= 0, 0 for 0, NaN for
// NaN and inf. Every intermediate stays a normal float for normal v: v·y is
// about sqrt(v), and the root's residual v - s² is v·(1 - s·y), so nothing is
// lost where kpipe flushes subnormals to zero (tensor/float_environment.hpp;
// 0.5·v and s² are subnormal near the smallest normals). Subnormal v read as 0,
// and -0 gives -0, as IEEE's sqrt: its bits shift as unsigned (as signed they
// would overflow the subtraction; Box-Muller's -2 log(1) is -0).
KOKKOS_INLINE_FUNCTION float sqrt(float v) {
  const auto half_bits = static_cast<std::int32_t>(static_cast<std::uint32_t>(detail::to_bits(v)) >> 1);
  float y = detail::from_bits(0x5f3759df - half_bits);
  y = y * (1.5f - 0.5f * (v * y) * y);
  y = y * (1.5f - 0.5f * (v * y) * y);
  const float s = v * y;
  return s + 0.5f * s * (1.0f - s * y);
}

// Natural logarithm of a normal positive float: x = 2^e m with m in
// [sqrt(1/2), sqrt(2)) from the bits, then Cephes' logf polynomial in m - 1
// and ln 2 split in two (its leading part exact in e times it).
KOKKOS_INLINE_FUNCTION float log(float x) {
  const std::int32_t offset = detail::to_bits(x) - 0x3f3504f3;  // bits of sqrt(1/2)
  const std::int32_t e = offset >> 23;                          // floor(log2(x / sqrt(1/2)))
  const float f = detail::from_bits(detail::to_bits(x) - e * (1 << 23)) - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const float n = static_cast<float>(e);
  const float tail = f * z * p - 2.12194440e-4f * n - 0.5f * z;
  return f + tail + 0.693359375f * n;
}

// sin and cos of 2 pi t, for |t| < 2^20: t = q/4 + r with |r| <= 1/8 exactly
// (no rounding in the reduction, the argument being in turns), Cephes'
// sinf and cosf polynomials at x = 2 pi r, and the quadrant q's rotation.
KOKKOS_INLINE_FUNCTION void sincos_turns(float t, float& sine, float& cosine) {
  const float k = 4.0f * t + detail::round_shifter;
  const float r = t - 0.25f * (k - detail::round_shifter);
  const std::int32_t quadrant = (detail::to_bits(k) - detail::to_bits(detail::round_shifter)) & 3;
  const float x = 6.283185307179586f * r;
  const float z = x * x;
  const float s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x;
  const float c =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
  const float sin_r = quadrant & 1 ? c : s;  // sin(x + q pi/2), cos(x + q pi/2)
  const float cos_r = quadrant & 1 ? s : c;
  sine = quadrant & 2 ? -sin_r : sin_r;
  cosine = (quadrant + 1) & 2 ? -cos_r : cos_r;
}

KOKKOS_INLINE_FUNCTION double erf(double x) { return tensor::compat::math::erf(x); }
KOKKOS_INLINE_FUNCTION double tanh(double x) { return tensor::compat::math::tanh(x); }
KOKKOS_INLINE_FUNCTION double exp(double x) { return tensor::compat::math::exp(x); }
KOKKOS_INLINE_FUNCTION double sqrt(double x) { return tensor::compat::math::sqrt(x); }
KOKKOS_INLINE_FUNCTION double log(double x) { return tensor::compat::math::log(x); }
KOKKOS_INLINE_FUNCTION void sincos_turns(double t, double& sine, double& cosine) {
  const double angle = 6.283185307179586 * t;
  sine = tensor::compat::math::sin(angle);
  cosine = tensor::compat::math::cos(angle);
}
KOKKOS_INLINE_FUNCTION double sech_squared(double x) {
  const double e = tensor::compat::math::exp(-2.0 * (x < 0 ? -x : x));
  return 4.0 * e / ((1.0 + e) * (1.0 + e));
}
KOKKOS_INLINE_FUNCTION double normal_pdf(double x) {
  return 0.39894228040143267794 * tensor::compat::math::exp(-0.5 * x * x);
}

}  // namespace kpipe::kernels::fast_math
