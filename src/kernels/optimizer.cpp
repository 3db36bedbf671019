#include "kpipe/kernels/optimizer.hpp"

#include <cmath>

#include "flat.hpp"
#include "host_loops.hpp"
#include "kpipe/kernels/fast_math.hpp"

namespace kpipe::kernels {

namespace {

// Elements per host_loop call, as in elementwise.cpp.
constexpr std::int64_t grain = 4096;

template <class Scalar, class View>
void require_same_shape(const char* what, const View& view, const tensor::Matrix<Scalar>& w) {
  tensor::require_shape(what, view, w.extent(0), w.extent(1));
}

}  // namespace

template <class Scalar>
void sgd_update(const tensor::ExecutionSpace& space, const SgdCoefficients& c, const tensor::Matrix<Scalar>& w,
                const tensor::ConstMatrix<tensor::identity_t<Scalar>>& g, const tensor::Matrix<Scalar>& velocity) {
  require_same_shape("SGD gradient", g, w);
  require_same_shape("SGD momentum buffer", velocity, w);
  const auto w_ = detail::flat(w);
  const auto g_ = detail::flat(g);
  const auto v_ = detail::flat(velocity);
  const auto lr = static_cast<Scalar>(c.lr);
  const auto momentum = static_cast<Scalar>(c.momentum);
  const auto decay = static_cast<Scalar>(c.weight_decay);
  const auto grad_scale = static_cast<Scalar>(c.grad_scale);
  detail::for_each(
      space, "kpipe::kernels::sgd_update", static_cast<std::int64_t>(w_.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) {
        const Scalar clipped = g_(e) * grad_scale;
        const Scalar grad = clipped + decay * w_(e);
        const Scalar velocity_e = momentum * v_(e) + grad;
        v_(e) = velocity_e;
        w_(e) -= lr * velocity_e;
      });
}

template <class Scalar>
void adamw_update(const tensor::ExecutionSpace& space, const AdamWCoefficients& c, const tensor::Matrix<Scalar>& w,
                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& g, const tensor::Matrix<Scalar>& m,
                  const tensor::Matrix<Scalar>& v) {
  require_same_shape("AdamW gradient", g, w);
  require_same_shape("AdamW first moment", m, w);
  require_same_shape("AdamW second moment", v, w);
  const auto w_ = detail::flat(w);
  const auto g_ = detail::flat(g);
  const auto m_ = detail::flat(m);
  const auto v_ = detail::flat(v);
  // Scalars of the update, computed once on the host in double. With
  // c2 = sqrt(1 - beta2^t), lr m_hat / (sqrt(v_hat) + eps) = (lr c2 / (1 - beta1^t)) m / (sqrt(v) + eps c2):
  // one division per element instead of two.
  const double root_correction2 = std::sqrt(1.0 - std::pow(c.beta2, c.step));
  const auto shrink = static_cast<Scalar>(1.0 - c.lr * c.weight_decay);
  const auto beta1 = static_cast<Scalar>(c.beta1);
  const auto beta2 = static_cast<Scalar>(c.beta2);
  const auto one_minus_beta1 = static_cast<Scalar>(1.0 - c.beta1);
  const auto one_minus_beta2 = static_cast<Scalar>(1.0 - c.beta2);
  const auto step_size = static_cast<Scalar>(c.lr * root_correction2 / (1.0 - std::pow(c.beta1, c.step)));
  const auto epsilon = static_cast<Scalar>(c.epsilon * root_correction2);
  const auto grad_scale = static_cast<Scalar>(c.grad_scale);
  detail::for_each(
      space, "kpipe::kernels::adamw_update", static_cast<std::int64_t>(w_.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) {
        const Scalar grad = g_(e) * grad_scale;
        const Scalar m_e = beta1 * m_(e) + one_minus_beta1 * grad;
        const Scalar v_e = beta2 * v_(e) + one_minus_beta2 * grad * grad;
        m_(e) = m_e;
        v_(e) = v_e;
        w_(e) = w_(e) * shrink - step_size * m_e / (fast_math::sqrt(v_e) + epsilon);
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                       \
  template void sgd_update<Scalar>(const tensor::ExecutionSpace&, const SgdCoefficients&,               \
                                   const tensor::Matrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,   \
                                   const tensor::Matrix<Scalar>&);                                      \
  template void adamw_update<Scalar>(const tensor::ExecutionSpace&, const AdamWCoefficients&,           \
                                     const tensor::Matrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, \
                                     const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
