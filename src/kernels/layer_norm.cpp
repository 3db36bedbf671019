#include "kpipe/kernels/layer_norm.hpp"

#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"
#include "stored.hpp"

// Forward and the input gradient work row by row (rows.hpp): on the host one
// thread per row with vectorised loops over the features, which stay in L1
// between the passes over a row.

namespace kpipe::kernels {

namespace {

// LayerNorm (Centred: minus the row mean, plus beta) and RMSNorm share each
// pass; `beta` and `dbeta` are read only when Centred.
template <bool Centred, class Scalar, class Stored>
void normalise_rows(const char* label, const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                    const tensor::ConstMatrix<Scalar>& gamma, const tensor::ConstMatrix<Scalar>& beta, Scalar epsilon,
                    const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& xhat,
                    const tensor::Matrix<Scalar>& rstd) {
  const int rows = static_cast<int>(X.extent(0));
  const int n = static_cast<int>(X.extent(1));
  tensor::require_shape("layer norm gamma", gamma, 1, n);
  if (Centred) tensor::require_shape("layer norm beta", beta, 1, n);
  tensor::require_shape("layer norm output", Y, rows, n);
  tensor::require_shape("layer norm xhat", xhat, rows, n);
  tensor::require_shape("layer norm rstd", rstd, rows, 1);
  detail::for_each_row(
      space, label, rows, KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const Scalar* const x = &X(i, 0);
        const Scalar* const g = &gamma(0, 0);
        const Scalar* const b = Centred ? &beta(0, 0) : nullptr;
        Scalar* const y = &Y(i, 0);
        Stored* const normalised = &xhat(i, 0);
        const Scalar mean = Centred ? detail::row_sum(row, n, [&](int j) { return x[j]; }) / n : Scalar(0);
        // Two passes: the variance of the centred values does not cancel.
        const Scalar squares = detail::row_sum(row, n, [&](int j) {
          const Scalar centred = x[j] - mean;
          return centred * centred;
        });
        const Scalar r = Scalar(1) / tensor::compat::math::sqrt(squares / n + epsilon);
        detail::row_for(row, n, [&](int j) {
          const Scalar value = (x[j] - mean) * r;
          detail::store(value, normalised[j]);
          if constexpr (Centred) {
            y[j] = value * g[j] + b[j];
          } else {
            y[j] = value * g[j];
          }
        });
        detail::row_single(row, [&] { rstd(i, 0) = r; });
      });
}

// The row mean of g = dY * gamma is zero's derivative for RMSNorm, which
// does not centre.
template <bool Centred, class Scalar, class Stored>
void normalised_input_gradient(const char* label, const tensor::ExecutionSpace& space,
                               const tensor::ConstMatrix<Scalar>& dY, const tensor::ConstMatrix<Stored>& xhat,
                               const tensor::ConstMatrix<Scalar>& rstd, const tensor::ConstMatrix<Scalar>& gamma,
                               const tensor::Matrix<Scalar>& dX) {
  const int rows = static_cast<int>(xhat.extent(0));
  const int n = static_cast<int>(xhat.extent(1));
  tensor::require_shape("layer norm output gradient", dY, rows, n);
  tensor::require_shape("layer norm rstd", rstd, rows, 1);
  tensor::require_shape("layer norm gamma", gamma, 1, n);
  tensor::require_shape("layer norm input gradient", dX, rows, n);
  detail::for_each_row(
      space, label, rows, KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const Scalar* const dy = &dY(i, 0);
        const Stored* const normalised = &xhat(i, 0);
        const Scalar* const g = &gamma(0, 0);
        Scalar* const dx = &dX(i, 0);
        const Scalar mean_g = Centred ? detail::row_sum(row, n, [&](int j) { return dy[j] * g[j]; }) / n : Scalar(0);
        const Scalar mean_gx =
            detail::row_sum(row, n, [&](int j) { return dy[j] * g[j] * detail::load(normalised[j]); }) / n;
        const Scalar r = rstd(i, 0);
        detail::row_for(row, n,
                        [&](int j) { dx[j] = r * (dy[j] * g[j] - mean_g - detail::load(normalised[j]) * mean_gx); });
      });
}

template <bool Centred, class Scalar, class Stored>
void normalised_weight_gradient(const char* label, const tensor::ExecutionSpace& space,
                                const tensor::ConstMatrix<Stored>& dY, const tensor::ConstMatrix<Stored>& xhat,
                                const tensor::Matrix<Scalar>& dgamma, const tensor::Matrix<Scalar>& dbeta) {
  const int rows = static_cast<int>(xhat.extent(0));
  const int n = static_cast<int>(xhat.extent(1));
  tensor::require_shape("layer norm output gradient", dY, rows, n);
  tensor::require_shape("layer norm gamma gradient", dgamma, 1, n);
  if (Centred) tensor::require_shape("layer norm beta gradient", dbeta, 1, n);
  // Each sum runs over the rows in ascending order, on every backend. GPUs
  // take a thread per column; the host a block of columns walking the rows,
  // so its inner loop is contiguous and vectorises (as add_column_sums does).
  constexpr int block = detail::host_memory ? 64 : 1;
  detail::for_each_block<block>(
      space, label, n, KOKKOS_LAMBDA(int first, int width) {
        Scalar sum_gamma[block] = {};
        Scalar sum_beta[block] = {};
        for (int i = 0; i < rows; ++i) {
          const Stored* const dy = &dY(i, first);
          const Stored* const normalised = &xhat(i, first);
          for (int j = 0; j < width; ++j) {
            const Scalar g = detail::load(dy[j]);
            sum_gamma[j] += g * detail::load(normalised[j]);
            if constexpr (Centred) sum_beta[j] += g;
          }
        }
        for (int j = 0; j < width; ++j) {
          dgamma(0, first + j) += sum_gamma[j];
          if constexpr (Centred) dbeta(0, first + j) += sum_beta[j];
        }
      });
}

}  // namespace

template <class Scalar, class Stored>
void layer_norm_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& beta, tensor::identity_t<Scalar> epsilon,
                        const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& xhat,
                        const tensor::Matrix<Scalar>& rstd) {
  normalise_rows<true, Scalar, Stored>("kpipe::kernels::layer_norm_forward", space, X, gamma, beta, epsilon, Y, xhat,
                                       rstd);
}

template <class Scalar, class Stored>
void layer_norm_backward_input(const tensor::ExecutionSpace& space,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                               const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& rstd,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                               const tensor::Matrix<Scalar>& dX) {
  normalised_input_gradient<true, Scalar, Stored>("kpipe::kernels::layer_norm_backward_input", space, dY, xhat, rstd,
                                                  gamma, dX);
}

template <class Scalar, class Stored>
void layer_norm_backward_weight(const tensor::ExecutionSpace& space,
                                const tensor::ConstMatrix<tensor::identity_t<Stored>>& dY,
                                const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                                const tensor::Matrix<Scalar>& dgamma, const tensor::Matrix<Scalar>& dbeta) {
  normalised_weight_gradient<true, Scalar, Stored>("kpipe::kernels::layer_norm_backward_weight", space, dY, xhat,
                                                   dgamma, dbeta);
}

template <class Scalar, class Stored>
void rms_norm_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma, tensor::identity_t<Scalar> epsilon,
                      const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& xhat,
                      const tensor::Matrix<Scalar>& rstd) {
  normalise_rows<false, Scalar, Stored>("kpipe::kernels::rms_norm_forward", space, X, gamma, {}, epsilon, Y, xhat,
                                        rstd);
}

template <class Scalar, class Stored>
void rms_norm_backward_input(const tensor::ExecutionSpace& space,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                             const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& rstd,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                             const tensor::Matrix<Scalar>& dX) {
  normalised_input_gradient<false, Scalar, Stored>("kpipe::kernels::rms_norm_backward_input", space, dY, xhat, rstd,
                                                   gamma, dX);
}

template <class Scalar, class Stored>
void rms_norm_backward_weight(const tensor::ExecutionSpace& space,
                              const tensor::ConstMatrix<tensor::identity_t<Stored>>& dY,
                              const tensor::ConstMatrix<tensor::identity_t<Stored>>& xhat,
                              const tensor::Matrix<Scalar>& dgamma) {
  normalised_weight_gradient<false, Scalar, Stored>("kpipe::kernels::rms_norm_backward_weight", space, dY, xhat, dgamma,
                                                    {});
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                     \
  template void layer_norm_forward<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,         \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,    \
                                           Scalar, const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
                                           const tensor::Matrix<Scalar>&);                                            \
  template void layer_norm_backward_input<Scalar>(                                                                    \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,          \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);         \
  template void layer_norm_backward_weight<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, \
                                                   const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&, \
                                                   const tensor::Matrix<Scalar>&);                                    \
  template void rms_norm_forward<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,           \
                                         const tensor::ConstMatrix<Scalar>&, Scalar, const tensor::Matrix<Scalar>&,   \
                                         const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&);               \
  template void rms_norm_backward_input<Scalar>(                                                                      \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,          \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);         \
  template void rms_norm_backward_weight<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,   \
                                                 const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

// compute.precision = bf16 and fp16: a float LayerNorm or RMSNorm keeps xhat and dY reduced.
#define KPIPE_INSTANTIATE_STORED(Stored)                                                                          \
  template void layer_norm_forward<float, Stored>(                                                                \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<float>&,        \
      const tensor::ConstMatrix<float>&, float, const tensor::Matrix<float>&, const tensor::Matrix<Stored>&,      \
      const tensor::Matrix<float>&);                                                                              \
  template void layer_norm_backward_input<float, Stored>(                                                         \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<Stored>&,       \
      const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);        \
  template void layer_norm_backward_weight<float, Stored>(                                                        \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<Stored>&, const tensor::ConstMatrix<Stored>&,      \
      const tensor::Matrix<float>&, const tensor::Matrix<float>&);                                                \
  template void rms_norm_forward<float, Stored>(                                                                  \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<float>&, float, \
      const tensor::Matrix<float>&, const tensor::Matrix<Stored>&, const tensor::Matrix<float>&);                 \
  template void rms_norm_backward_input<float, Stored>(                                                           \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<Stored>&,       \
      const tensor::ConstMatrix<float>&, const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);        \
  template void rms_norm_backward_weight<float, Stored>(                                                          \
      const tensor::ExecutionSpace&, const tensor::ConstMatrix<Stored>&, const tensor::ConstMatrix<Stored>&,      \
      const tensor::Matrix<float>&);
KPIPE_INSTANTIATE_STORED(tensor::BFloat16)
KPIPE_INSTANTIATE_STORED(tensor::Half)
#undef KPIPE_INSTANTIATE_STORED

}  // namespace kpipe::kernels
