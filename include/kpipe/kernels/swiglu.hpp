#pragma once
// SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"; Llama's MLP):
// Y = silu(A) ⊙ B for X = [A | B], rows x 2n in, rows x n out, silu(a) =
// a·sigmoid(a). Backward reads X as forward saved it: Scalar, or for float
// bfloat16 or float16 (`Stored`, compute.precision).

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

template <class Scalar>
void swiglu_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                    const tensor::Matrix<Scalar>& Y);

// dA = dY ⊙ B ⊙ silu'(A), silu'(a) = s + a·s·(1 - s) with s = sigmoid(a);
// dB = dY ⊙ silu(A).
template <class Scalar, class Stored = Scalar>
void swiglu_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Stored>>& X,
                     const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dX);

}  // namespace kpipe::kernels
