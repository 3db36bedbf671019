#pragma once
// Conversions between float32 and bfloat16 for compute.precision = bf16
// (docs/model.md, Precision): the operands a Linear hands gemm_bf16 are its
// float32 inputs, output gradients and master weights rounded to bfloat16,
// and its bias gradient sums bfloat16 output gradients in float32.

#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels {

// Y = X rounded to the nearest bfloat16 (ties to even; NaN stays NaN, values
// beyond bfloat16's range become infinities, as in every framework).
void round_to_bfloat16(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
                       const tensor::Matrix<tensor::BFloat16>& Y);

// Y = X in float32 (exact).
void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
           const tensor::Matrix<float>& Y);

// sums(0, j) = sums(0, j) + (X(0, j) + X(1, j) + ...) in float32, in ascending
// row order as the float32 add_column_sums: a bias gradient from bfloat16 dY.
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                     const tensor::Matrix<float>& sums);

}  // namespace kpipe::kernels
