#pragma once
// Layer normalisation over the features of each row:
// Y = (X - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + epsilon), with
// the biased variance; and RMSNorm (Zhang & Sennrich 2019, Llama's), which
// neither centres nor shifts: Y = X * rstd * gamma, rstd = 1 / sqrt(mean(X²) +
// epsilon). gamma and beta are 1 x n rows; rstd is a rows x 1 column.
// What the layer keeps from F to B and W (xhat, and dY from B to W) is of
// `Stored`: Scalar, or for float bfloat16 and float16 under
// compute.precision, written and read in that type directly.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Y and the saved normalised input xhat = (X - mean) * rstd and rstd.
template <class Scalar, class Stored = Scalar>
void layer_norm_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& beta, tensor::identity_t<Scalar> epsilon,
                        const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& xhat,
                        const tensor::Matrix<Scalar>& rstd);

// dX = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dY * gamma.
template <class Scalar, class Stored = Scalar>
void layer_norm_backward_input(const tensor::ExecutionSpace& space,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                               const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& rstd,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                               const tensor::Matrix<Scalar>& dX);

// dgamma += column sums of dY * xhat, dbeta += column sums of dY (each sum in
// ascending row order, then added).
template <class Scalar, class Stored = Scalar>
void layer_norm_backward_weight(const tensor::ExecutionSpace& space,
                                const tensor::ConstMatrix<tensor::identity_t<Stored>>& dY,
                                const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                                const tensor::Matrix<Scalar>& dgamma, const tensor::Matrix<Scalar>& dbeta);

// RMSNorm: Y and the saved x̂ = X * rstd and rstd.
template <class Scalar, class Stored = Scalar>
void rms_norm_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma, tensor::identity_t<Scalar> epsilon,
                      const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& xhat,
                      const tensor::Matrix<Scalar>& rstd);

// RMSNorm: dX = rstd * (g - xhat * mean(g * xhat)) with g = dY * gamma.
template <class Scalar, class Stored = Scalar>
void rms_norm_backward_input(const tensor::ExecutionSpace& space,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                             const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& rstd,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                             const tensor::Matrix<Scalar>& dX);

// RMSNorm: dgamma += column sums of dY * xhat (ascending row order, then added).
template <class Scalar, class Stored = Scalar>
void rms_norm_backward_weight(const tensor::ExecutionSpace& space,
                              const tensor::ConstMatrix<tensor::identity_t<Stored>>& dY,
                              const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                              const tensor::Matrix<Scalar>& dgamma);

}  // namespace kpipe::kernels
