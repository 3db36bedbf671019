#pragma once
// What a tensor is, without its memory: a shape of any rank and an element
// type. Layers declare their inputs, outputs and saved tensors with these, the
// pool hands out buffers for them, and messages print them ("32x16x64 float32").

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kpipe::tensor {

// bfloat16 is a storage type: 8 exponent bits like float32, 7 mantissa bits.
// Arithmetic converts to float32, accumulates there and rounds back on store:
// compute.precision = bf16 keeps GEMM operands in it (kernels::gemm_bf16).
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

enum class DType : std::uint8_t { float32, float64, bfloat16 };

std::size_t size_of(DType dtype);
// "float32", "float64" or "bfloat16".
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

class TensorSpec {
 public:
  TensorSpec() = default;
  // Throws an input error for a negative extent.
  TensorSpec(std::vector<std::int64_t> shape, DType dtype);
  template <class Scalar>
  static TensorSpec of(std::vector<std::int64_t> shape) {
    return TensorSpec(std::move(shape), dtype_of<Scalar>());
  }
  template <class Scalar>
  static TensorSpec matrix(std::int64_t rows, std::int64_t cols) {
    return of<Scalar>({rows, cols});
  }

  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t extent(int dim) const { return shape_.at(static_cast<std::size_t>(dim)); }
  int rank() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  // The product of the extents (1 for rank 0).
  std::int64_t elements() const;
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * size_of(dtype_); }
  // "32x16x64 float32"; a rank-0 tensor is "scalar float32".
  std::string to_string() const;

  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.dtype_ == b.dtype_ && a.shape_ == b.shape_;
  }
  friend bool operator!=(const TensorSpec& a, const TensorSpec& b) { return !(a == b); }

 private:
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::float32;
};

}  // namespace kpipe::tensor
