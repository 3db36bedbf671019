#pragma once
// Conversions between float32 and the reduced-precision storage types of
// compute.precision = bf16 and fp16 (docs/model.md, Precision): the operands
// a Linear hands gemm_mixed are its float32 inputs, output gradients and
// master weights rounded to bfloat16 or float16, and its bias gradient sums
// the reduced output gradients in float32. One overload per storage type.

#include "kpipe/config/run_config.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels {

// The element type a float32 Linear's GEMMs take under `precision`:
// float32, bfloat16 or float16.
constexpr tensor::DType operand_dtype(config::Precision precision) {
  switch (precision) {
    case config::Precision::bf16:
      return tensor::DType::bfloat16;
    case config::Precision::fp16:
      return tensor::DType::float16;
    case config::Precision::fp32:
      break;
  }
  return tensor::DType::float32;
}

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

// sums(0, j) = sums(0, j) + (X(0, j) + X(1, j) + ...) in float32, in ascending
// row order as the float32 add_column_sums: a bias gradient from reduced dY.
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                     const tensor::Matrix<float>& sums);
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::Half>& X,
                     const tensor::Matrix<float>& sums);

}  // namespace kpipe::kernels
