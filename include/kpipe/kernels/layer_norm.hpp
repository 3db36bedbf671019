#pragma once
// Layer normalisation over the features of each row:
// Y = (X - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + epsilon), with
// the biased variance. gamma and beta are 1 x n rows; rstd is a rows x 1 column.

#include "kpipe/kernels/tensor.hpp"

namespace kpipe::kernels {

// Y and the saved normalised input xhat = (X - mean) * rstd and rstd.
template <class Scalar>
void layer_norm_forward(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& X,
                        const ConstMatrix<identity_t<Scalar>>& gamma, const ConstMatrix<identity_t<Scalar>>& beta,
                        identity_t<Scalar> epsilon, const Matrix<Scalar>& Y, const Matrix<Scalar>& xhat,
                        const Matrix<Scalar>& rstd);

// dX = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dY * gamma.
template <class Scalar>
void layer_norm_backward_input(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& dY,
                               const ConstMatrix<identity_t<Scalar>>& xhat, const ConstMatrix<identity_t<Scalar>>& rstd,
                               const ConstMatrix<identity_t<Scalar>>& gamma, const Matrix<Scalar>& dX);

// dgamma += column sums of dY * xhat, dbeta += column sums of dY (each sum in
// ascending row order, then added).
template <class Scalar>
void layer_norm_backward_weight(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& dY,
                                const ConstMatrix<identity_t<Scalar>>& xhat, const Matrix<Scalar>& dgamma,
                                const Matrix<Scalar>& dbeta);

}  // namespace kpipe::kernels
