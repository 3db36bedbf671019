#include "kpipe/kernels/layer_norm.hpp"

#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {
// One team per row; its threads share the row's reductions.
using Policy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using Member = Policy::member_type;
}  // namespace

template <class Scalar>
void layer_norm_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& beta, tensor::identity_t<Scalar> epsilon,
                        const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Scalar>& xhat,
                        const tensor::Matrix<Scalar>& rstd) {
  const int rows = static_cast<int>(X.extent(0));
  const int n = static_cast<int>(X.extent(1));
  tensor::require_shape("layer norm gamma", gamma, 1, n);
  tensor::require_shape("layer norm beta", beta, 1, n);
  tensor::require_shape("layer norm output", Y, rows, n);
  tensor::require_shape("layer norm xhat", xhat, rows, n);
  tensor::require_shape("layer norm rstd", rstd, rows, 1);
  Kokkos::parallel_for(
      "kpipe::kernels::layer_norm_forward", Policy(space, rows, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        Scalar sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n), [&](int j, Scalar& partial) { partial += X(i, j); }, sum);
        const Scalar mean = sum / n;
        // Two passes: the variance of the centred values does not cancel.
        Scalar squares = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n),
            [&](int j, Scalar& partial) {
              const Scalar centred = X(i, j) - mean;
              partial += centred * centred;
            },
            squares);
        const Scalar r = Scalar(1) / tensor::compat::math::sqrt(squares / n + epsilon);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int j) {
          const Scalar normalised = (X(i, j) - mean) * r;
          xhat(i, j) = normalised;
          Y(i, j) = normalised * gamma(0, j) + beta(0, j);
        });
        Kokkos::single(Kokkos::PerTeam(team), [&] { rstd(i, 0) = r; });
      });
}

template <class Scalar>
void layer_norm_backward_input(const tensor::ExecutionSpace& space,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& xhat,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& rstd,
                               const tensor::ConstMatrix<tensor::identity_t<Scalar>>& gamma,
                               const tensor::Matrix<Scalar>& dX) {
  const int rows = static_cast<int>(xhat.extent(0));
  const int n = static_cast<int>(xhat.extent(1));
  tensor::require_shape("layer norm output gradient", dY, rows, n);
  tensor::require_shape("layer norm rstd", rstd, rows, 1);
  tensor::require_shape("layer norm gamma", gamma, 1, n);
  tensor::require_shape("layer norm input gradient", dX, rows, n);
  Kokkos::parallel_for(
      "kpipe::kernels::layer_norm_backward_input", Policy(space, rows, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        Scalar sum_g = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n), [&](int j, Scalar& partial) { partial += dY(i, j) * gamma(0, j); },
            sum_g);
        Scalar sum_gx = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n),
            [&](int j, Scalar& partial) { partial += dY(i, j) * gamma(0, j) * xhat(i, j); }, sum_gx);
        const Scalar mean_g = sum_g / n;
        const Scalar mean_gx = sum_gx / n;
        const Scalar r = rstd(i, 0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n),
                             [&](int j) { dX(i, j) = r * (dY(i, j) * gamma(0, j) - mean_g - xhat(i, j) * mean_gx); });
      });
}

template <class Scalar>
void layer_norm_backward_weight(const tensor::ExecutionSpace& space,
                                const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                                const tensor::ConstMatrix<tensor::identity_t<Scalar>>& xhat,
                                const tensor::Matrix<Scalar>& dgamma, const tensor::Matrix<Scalar>& dbeta) {
  const int rows = static_cast<int>(xhat.extent(0));
  const int n = static_cast<int>(xhat.extent(1));
  tensor::require_shape("layer norm output gradient", dY, rows, n);
  tensor::require_shape("layer norm gamma gradient", dgamma, 1, n);
  tensor::require_shape("layer norm beta gradient", dbeta, 1, n);
  Kokkos::parallel_for(
      "kpipe::kernels::layer_norm_backward_weight", Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(int j) {
        Scalar sum_gamma = 0;
        Scalar sum_beta = 0;
        for (int i = 0; i < rows; ++i) {
          sum_gamma += dY(i, j) * xhat(i, j);
          sum_beta += dY(i, j);
        }
        dgamma(0, j) += sum_gamma;
        dbeta(0, j) += sum_beta;
      });
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
                                                   const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
