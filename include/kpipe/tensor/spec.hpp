#pragma once
// What a tensor is, without its memory: a shape of any rank and an element
// type. Layers declare their inputs, outputs and saved tensors with these, the
// pool hands out buffers for them, and messages print them ("32x16x64 float32").

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace kpipe::tensor {

// bfloat16 is a storage type: 8 exponent bits like float32, 7 mantissa bits.
// Arithmetic converts to float32, accumulates there and rounds back on store:
// compute.precision = bf16 keeps GEMM operands in it (kernels::gemm_mixed).
struct BFloat16 {
  std::uint16_t bits = 0;
};

// Round to nearest even; a NaN stays a (quiet) NaN.
KOKKOS_INLINE_FUNCTION BFloat16 to_bfloat16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(bits >> 16)};
}

// Exact: every bfloat16 is a float32.
KOKKOS_INLINE_FUNCTION float to_float(BFloat16 value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value.bits) << 16;
  float result = 0;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

// IEEE binary16, also a storage type: 5 exponent bits, 10 mantissa bits,
// largest finite 65504, subnormals down to 2^-24. compute.precision = fp16
// keeps GEMM operands in it; its narrow range is what loss scaling is for.
struct Half {
  std::uint16_t bits = 0;
};

// Round to nearest even, into the subnormals below 2^-14; values from 65520
// on become infinities and a NaN stays a (quiet) NaN, as IEEE 754 rounds.
// Branch-free (each case computed, one selected), so host loops vectorise.
KOKKOS_INLINE_FUNCTION Half to_half(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  // Normal: rebias the exponent from 127 to 15 and round the 13 bits cut off
  // to nearest even (a carry moves into the exponent, up to Inf).
  const std::uint32_t normal = (magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 (spacing 2^-24, float16's subnormal spacing)
  // rounds the value to a multiple of 2^-24, to nearest even, in the float
  // adder; its low mantissa bits are then the subnormal's.
  float shifted = 0;
  std::memcpy(&shifted, &magnitude, sizeof shifted);
  shifted += 0.5f;
  std::uint32_t shifted_bits = 0;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  const std::uint32_t subnormal = shifted_bits - 0x3f000000u;
  const std::uint32_t special = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN, or Inf and overflow
  const std::uint32_t half = magnitude >= 0x47800000u ? special : magnitude < 0x38800000u ? subnormal : normal;
  return Half{static_cast<std::uint16_t>(sign | half)};
}

// Exact: every binary16 is a float32. Branch-free like to_half.
KOKKOS_INLINE_FUNCTION float to_float(Half value) {
  const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  const std::uint32_t rest = static_cast<std::uint32_t>(value.bits & 0x7fffu) << 13;  // exponent and mantissa
  const std::uint32_t exponent = rest & 0x0f800000u;
  // Normal: rebias 15 to 127; Inf and NaN (exponent 31) rebias to 255.
  const std::uint32_t normal = rest + (exponent == 0x0f800000u ? 0x70000000u : 0x38000000u);
  // Subnormal (and zero): m 2^-24 is (2^-14 + m 2^-24) - 2^-14, both normal float32.
  const std::uint32_t offset_bits = rest + 0x38800000u;
  float offset = 0;
  std::memcpy(&offset, &offset_bits, sizeof offset);
  const float subnormal = offset - 0x1p-14f;
  std::uint32_t subnormal_bits = 0;
  std::memcpy(&subnormal_bits, &subnormal, sizeof subnormal_bits);
  const std::uint32_t bits = sign | (exponent == 0 ? subnormal_bits : normal);
  float result = 0;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

enum class DType : std::uint8_t { float32, float64, bfloat16, float16 };

std::size_t size_of(DType dtype);
// "float32", "float64", "bfloat16" or "float16".
const char* name_of(DType dtype);

template <class Scalar>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::float64;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bfloat16;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::float16;
}

// f(T{}) for the element type T of `dtype`: float, double, BFloat16 or Half.
template <class F>
decltype(auto) with_element_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float64:
      return f(double{});
    case DType::bfloat16:
      return f(BFloat16{});
    case DType::float16:
      return f(Half{});
    case DType::float32:
      break;
  }
  return f(float{});
}

// A tensor's shape and element type. The extents live in the spec itself,
// not on the heap: a Tensor is copied into every list and context a
// microbatch passes through, and a vector of extents cost an allocation per
// copy, thousands per training step (docs/performance.md, "AMD EPYC, Zen 4,
// a second host").
class TensorSpec {
 public:
  // Kokkos' limit on a View's rank.
  static constexpr int max_rank = 8;

  TensorSpec() = default;
  // Throws an input error for a negative extent or more than max_rank of them.
  TensorSpec(std::initializer_list<std::int64_t> shape, DType dtype);
  TensorSpec(const std::vector<std::int64_t>& shape, DType dtype);
  template <std::size_t Rank>
  TensorSpec(const std::array<std::int64_t, Rank>& shape, DType dtype) : dtype_(dtype) {
    assign(shape.data(), Rank);
  }
  template <class Scalar, class Shape>
  static TensorSpec of(const Shape& shape) {
    return TensorSpec(shape, dtype_of<Scalar>());
  }
  template <class Scalar>
  static TensorSpec of(std::initializer_list<std::int64_t> shape) {
    return TensorSpec(shape, dtype_of<Scalar>());
  }
  template <class Scalar>
  static TensorSpec matrix(std::int64_t rows, std::int64_t cols) {
    return TensorSpec({rows, cols}, dtype_of<Scalar>());
  }

  std::vector<std::int64_t> shape() const { return {extents_.begin(), extents_.begin() + rank_}; }
  // Throws a runtime error for a dimension outside [0, rank()).
  std::int64_t extent(int dim) const {
    if (dim < 0 || dim >= rank_) throw_no_dimension(dim);
    return extents_[static_cast<std::size_t>(dim)];
  }
  int rank() const { return rank_; }
  DType dtype() const { return dtype_; }
  // The product of the extents (1 for rank 0).
  std::int64_t elements() const;
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * size_of(dtype_); }
  // "32x16x64 float32"; a rank-0 tensor is "scalar float32".
  std::string to_string() const;

  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.dtype_ == b.dtype_ && a.rank_ == b.rank_ &&
           std::equal(a.extents_.begin(), a.extents_.begin() + a.rank_, b.extents_.begin());
  }
  friend bool operator!=(const TensorSpec& a, const TensorSpec& b) { return !(a == b); }

 private:
  void assign(const std::int64_t* extents, std::size_t rank);
  [[noreturn]] void throw_no_dimension(int dim) const;

  std::array<std::int64_t, max_rank> extents_{};
  int rank_ = 0;
  DType dtype_ = DType::float32;
};

}  // namespace kpipe::tensor
