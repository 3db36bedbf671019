#include "kpipe/kernels/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "flat.hpp"
#include "host_loops.hpp"
#include "kpipe/kernels/detail/fast_math.hpp"
#include "kpipe/tensor/host_threads.hpp"

namespace kpipe::kernels {

namespace {

// Elements per host_loop call, as in elementwise.cpp.
constexpr std::int64_t grain = 4096;

template <class Scalar>
void require_shapes(const ParameterUpdate<Scalar>& p, const char* first, const char* second) {
  tensor::require_shape("optimizer gradient", p.g, p.w.extent(0), p.w.extent(1));
  tensor::require_shape(first, p.first, p.w.extent(0), p.w.extent(1));
  if (second != nullptr) tensor::require_shape(second, p.second, p.w.extent(0), p.w.extent(1));
}

// element(p)(e) for every element e of every parameter p. A threaded host
// runs one region, thread t the t-th of equal shares of all the elements in
// parameter order, each parameter's part of it one host_loop; elsewhere a
// kernel per parameter.
template <class Scalar, class Element>
void for_each_element(const tensor::ExecutionSpace& space, const char* name,
                      const std::vector<ParameterUpdate<Scalar>>& parameters, const Element& element) {
  if constexpr (detail::host_memory) {
    const int threads = tensor::compat::concurrency(space);
    if (threads > 1 && !tensor::compat::in_host_parallel_region()) {
      std::int64_t total = 0;
      for (const auto& p : parameters) total += static_cast<std::int64_t>(p.w.size());
      tensor::on_host_threads(space, name, threads, [&](int t) {
        const std::int64_t begin = total * t / threads, end = total * (t + 1) / threads;
        std::int64_t offset = 0;
        for (const auto& p : parameters) {
          const auto size = static_cast<std::int64_t>(p.w.size());
          const std::int64_t first = std::max(begin, offset), last = std::min(end, offset + size);
          if (first < last) detail::host_loop(element(p), first - offset, last - offset);
          offset += size;
        }
      });
      return;
    }
  }
  for (const auto& p : parameters) {
    detail::for_each(space, name, static_cast<std::int64_t>(p.w.size()), grain, element(p));
  }
}

// One element of SGD's update.
template <class Scalar>
struct SgdElement {
  detail::Flat<Scalar> w;
  detail::Flat<const Scalar> g;
  detail::Flat<Scalar> velocity;
  Scalar lr, momentum, decay, grad_scale;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const Scalar clipped = g(e) * grad_scale;
    const Scalar grad = clipped + decay * w(e);
    const Scalar velocity_e = momentum * velocity(e) + grad;
    velocity(e) = velocity_e;
    w(e) -= lr * velocity_e;
  }
};

// One element of AdamW's update, its scalars computed once on the host in
// double. With c2 = sqrt(1 - beta2^t), lr m_hat / (sqrt(v_hat) + eps) =
// (lr c2 / (1 - beta1^t)) m / (sqrt(v) + eps c2): one division per element
// instead of two.
template <class Scalar>
struct AdamWElement {
  detail::Flat<Scalar> w;
  detail::Flat<const Scalar> g;
  detail::Flat<Scalar> m, v;
  Scalar shrink, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, epsilon, grad_scale;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t e) const {
    const Scalar grad = g(e) * grad_scale;
    const Scalar m_e = beta1 * m(e) + one_minus_beta1 * grad;
    const Scalar v_e = beta2 * v(e) + one_minus_beta2 * grad * grad;
    m(e) = m_e;
    v(e) = v_e;
    w(e) = w(e) * shrink - step_size * m_e / (fast_math::sqrt(v_e) + epsilon);
  }
};

}  // namespace

template <class Scalar>
void sgd_update(const tensor::ExecutionSpace& space, const SgdCoefficients& c,
                const std::vector<ParameterUpdate<Scalar>>& parameters) {
  for (const auto& p : parameters) require_shapes(p, "SGD momentum buffer", nullptr);
  for_each_element(space, "kpipe::kernels::sgd_update", parameters, [&c](const ParameterUpdate<Scalar>& p) {
    return SgdElement<Scalar>{detail::flat(p.w),
                              detail::flat(p.g),
                              detail::flat(p.first),
                              static_cast<Scalar>(c.lr),
                              static_cast<Scalar>(c.momentum),
                              static_cast<Scalar>(p.weight_decay),
                              static_cast<Scalar>(c.grad_scale)};
  });
}

template <class Scalar>
void adamw_update(const tensor::ExecutionSpace& space, const AdamWCoefficients& c,
                  const std::vector<ParameterUpdate<Scalar>>& parameters) {
  for (const auto& p : parameters) require_shapes(p, "AdamW first moment", "AdamW second moment");
  const double root_correction2 = std::sqrt(1.0 - std::pow(c.beta2, c.step));
  const auto step_size = static_cast<Scalar>(c.lr * root_correction2 / (1.0 - std::pow(c.beta1, c.step)));
  for_each_element(space, "kpipe::kernels::adamw_update", parameters, [&](const ParameterUpdate<Scalar>& p) {
    return AdamWElement<Scalar>{detail::flat(p.w),
                                detail::flat(p.g),
                                detail::flat(p.first),
                                detail::flat(p.second),
                                static_cast<Scalar>(1.0 - c.lr * p.weight_decay),
                                static_cast<Scalar>(c.beta1),
                                static_cast<Scalar>(c.beta2),
                                static_cast<Scalar>(1.0 - c.beta1),
                                static_cast<Scalar>(1.0 - c.beta2),
                                step_size,
                                static_cast<Scalar>(c.epsilon * root_correction2),
                                static_cast<Scalar>(c.grad_scale)};
  });
}

template <class Scalar>
void zero_gradients(const tensor::ExecutionSpace& space, const std::vector<OwnedGradient<Scalar>>& gradients) {
  if constexpr (detail::host_memory) {
    const int threads = tensor::compat::concurrency(space);
    const bool owned = std::all_of(gradients.begin(), gradients.end(), [threads](const OwnedGradient<Scalar>& o) {
      return o.thread >= 0 && o.thread < threads;
    });
    // Each gradient whole on the thread whose W writes it, so its lines stay
    // in that core's caches. Equal shares of all the elements in one region
    // ran the stage's F and B + W slower than a deep_copy each
    // (docs/performance-log.md, "Rows through the stage").
    if (threads > 1 && owned && !tensor::compat::in_host_parallel_region()) {
      tensor::on_host_threads(space, "kpipe::kernels::zero_gradients", threads, [&](int t) {
        for (const auto& o : gradients) {
          if (o.thread != t) continue;
          const auto g = detail::flat(o.g);
          detail::host_loop([g](std::int64_t e) { g(e) = Scalar(0); }, 0, static_cast<std::int64_t>(o.g.size()));
        }
      });
      return;
    }
  }
  for (const auto& o : gradients) Kokkos::deep_copy(space, o.g, Scalar(0));
}

#define KPIPE_INSTANTIATE(Scalar)                                                             \
  template void sgd_update<Scalar>(const tensor::ExecutionSpace&, const SgdCoefficients&,     \
                                   const std::vector<ParameterUpdate<Scalar>>&);              \
  template void adamw_update<Scalar>(const tensor::ExecutionSpace&, const AdamWCoefficients&, \
                                     const std::vector<ParameterUpdate<Scalar>>&);            \
  template void zero_gradients<Scalar>(const tensor::ExecutionSpace&, const std::vector<OwnedGradient<Scalar>>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
