#pragma once
// Elementwise kernels, the row/column broadcasts of a bias, and the reductions
// over whole matrices. Matrices must be contiguous (a full tensor::Matrix or a block
// of its rows). Outputs may alias inputs of the same shape.

#include <string_view>

#include "kpipe/kernels/choices.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Y = f(X), GELU in its exact erf form.
template <class Scalar>
void activation_forward(const tensor::ExecutionSpace& space, Activation f,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X, const tensor::Matrix<Scalar>& Y);

// Y = f(X) and D = f'(X), what activation_backward needs: training keeps D
// instead of X, and GELU's backward does not evaluate erf again. D is Scalar,
// or for float bfloat16 or float16 (`Stored`; compute.precision keeps it in
// that type), rounded as round_to rounds, with no float32 copy in between.
template <class Scalar, class Stored = Scalar>
void activation_forward(const tensor::ExecutionSpace& space, Activation f,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X, const tensor::Matrix<Scalar>& Y,
                        const tensor::Matrix<Stored>& D);

// dX = D * dY, with D = f'(X) from activation_forward (widened exactly when Stored is reduced).
template <class Scalar, class Stored = Scalar>
void activation_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Stored>>& D,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dX);

// C = A + B.
template <class Scalar>
void add(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, const tensor::Matrix<Scalar>& C);

// Y(i, j) += row(0, j) for every row i: adds a bias.
template <class Scalar>
void add_row(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& row,
             const tensor::Matrix<Scalar>& Y);

// sums(0, j) = sums(0, j) + (X(0, j) + X(1, j) + ...), the column sum taken in
// ascending row order before it is added: a bias gradient accumulates the same
// way whatever else runs.
template <class Scalar>
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                     const tensor::Matrix<Scalar>& sums);

// X = factor * X.
template <class Scalar>
void scale(const tensor::ExecutionSpace& space, tensor::identity_t<Scalar> factor, const tensor::Matrix<Scalar>& X);

// The sum of squares of all elements, accumulated in double in an order that
// depends on the element count only (on the host: 16 interleaved partial sums
// per chunk of 4096 elements, the chunks' sums added in order).
template <class Scalar>
double squared_norm(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X);

}  // namespace kpipe::kernels
