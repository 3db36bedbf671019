#pragma once
// Elementwise kernels, the row/column broadcasts of a bias, and the reductions
// over whole matrices. Matrices must be contiguous (a full Matrix or a block
// of its rows). Outputs may alias inputs of the same shape.

#include <string_view>

#include "kpipe/kernels/tensor.hpp"

namespace kpipe::kernels {

enum class Activation { gelu, relu, tanh };

// "gelu", "relu" or "tanh" (the values of model.activation).
Activation parse_activation(std::string_view name);

// Y = f(X), GELU in its exact erf form.
template <class Scalar>
void activation_forward(const ExecutionSpace& space, Activation f, const ConstMatrix<identity_t<Scalar>>& X,
                        const Matrix<Scalar>& Y);

// dX = f'(X) * dY.
template <class Scalar>
void activation_backward(const ExecutionSpace& space, Activation f, const ConstMatrix<identity_t<Scalar>>& X,
                         const ConstMatrix<identity_t<Scalar>>& dY, const Matrix<Scalar>& dX);

// C = A + B.
template <class Scalar>
void add(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& A,
         const ConstMatrix<identity_t<Scalar>>& B, const Matrix<Scalar>& C);

// Y(i, j) += row(0, j) for every row i: adds a bias.
template <class Scalar>
void add_row(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& row, const Matrix<Scalar>& Y);

// sums(0, j) = sums(0, j) + (X(0, j) + X(1, j) + ...), the column sum taken in
// ascending row order before it is added: a bias gradient accumulates the same
// way whatever else runs.
template <class Scalar>
void add_column_sums(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& X, const Matrix<Scalar>& sums);

// X = factor * X.
template <class Scalar>
void scale(const ExecutionSpace& space, identity_t<Scalar> factor, const Matrix<Scalar>& X);

// The sum of squares of all elements, accumulated in double.
template <class Scalar>
double squared_norm(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& X);

}  // namespace kpipe::kernels
