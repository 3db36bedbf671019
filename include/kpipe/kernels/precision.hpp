#pragma once
// Conversions between float32 and the reduced-precision storage types of
// compute.precision = bf16 and fp16 (docs/model.md, Precision): the operands
// a Linear hands gemm_mixed are its float32 inputs, output gradients and
// master weights rounded to bfloat16 or float16, and its bias gradient sums
// the reduced output gradients in float32. One overload per storage type.

#include <type_traits>

#include "kpipe/kernels/choices.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"
#include "kpipe/tensor/tensor.hpp"

namespace kpipe::kernels {

// The element type a float32 Linear's GEMMs take under `precision`:
// float32, bfloat16 or float16.
constexpr tensor::DType operand_dtype(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return tensor::DType::bfloat16;
    case Precision::fp16:
      return tensor::DType::float16;
    case Precision::fp32:
      break;
  }
  return tensor::DType::float32;
}

// The element type layers of `Scalar` keep what they save between passes in,
// and stages send their boundaries in: the reduced type of `precision` for
// float layers, Scalar itself otherwise (float64 layers compute in float64).
template <class Scalar>
constexpr tensor::DType stored_dtype(Precision precision) {
  return std::is_same_v<Scalar, float> ? operand_dtype(precision) : tensor::dtype_of<Scalar>();
}

// f(T{}) for the storage type T of a reduced dtype (bfloat16: tensor::BFloat16,
// float16: tensor::Half); throws a runtime error naming `what` for any other.
template <class F>
void with_reduced_type(tensor::DType dtype, const char* what, F&& f);

// Y = X rounded to the nearest bfloat16 or float16 (ties to even; NaN stays
// NaN, values beyond the type's range become infinities, as in every
// framework: float16's largest finite value is 65504).
void round_to(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
              const tensor::Matrix<tensor::BFloat16>& Y);
void round_to(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
              const tensor::Matrix<tensor::Half>& Y);

// Y = X in float32 (exact).
void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
           const tensor::Matrix<float>& Y);
void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::Half>& X,
           const tensor::Matrix<float>& Y);

// X = X rounded to `dtype` and widened back, in place: afterwards X holds
// values of that type exactly, so a copy in it loses nothing. A no-op for
// float32.
void round_through(const tensor::ExecutionSpace& space, const tensor::Matrix<float>& X, tensor::DType dtype);

// `X` in `dtype` for keeping or sending: X itself when it has that type, else
// X rounded (bfloat16, float16) in a buffer of `exec`'s pool under `label`.
tensor::Tensor rounded(tensor::ExecContext& exec, const tensor::Tensor& X, tensor::DType dtype, const char* label);
// `X` to compute with: X itself unless it is bfloat16 or float16, which is
// widened (exactly) into a float32 buffer of `exec`'s pool under `label`.
tensor::Tensor widened(tensor::ExecContext& exec, const tensor::Tensor& X, const char* label);

// sums(0, j) = sums(0, j) + (X(0, j) + X(1, j) + ...) in float32, in ascending
// row order as the float32 add_column_sums: a bias gradient from reduced dY.
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                     const tensor::Matrix<float>& sums);
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::Half>& X,
                     const tensor::Matrix<float>& sums);

namespace detail {
[[noreturn]] void not_reduced(tensor::DType dtype, const char* what);
}  // namespace detail

template <class F>
void with_reduced_type(tensor::DType dtype, const char* what, F&& f) {
  if (dtype == tensor::DType::bfloat16) {
    f(tensor::BFloat16{});
  } else if (dtype == tensor::DType::float16) {
    f(tensor::Half{});
  } else {
    detail::not_reduced(dtype, what);
  }
}

// f(T{}) for the element type T in which layers of `Scalar` keep what they
// save under `precision` (stored_dtype): Scalar, or bfloat16 or float16.
template <class Scalar, class F>
void with_stored_type(Precision precision, F&& f) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (precision != Precision::fp32) {
      with_reduced_type(operand_dtype(precision), "a stored tensor", f);
      return;
    }
  }
  f(Scalar{});
}

}  // namespace kpipe::kernels
