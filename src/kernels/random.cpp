#include "kpipe/kernels/random.hpp"

#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

template <class Scalar>
void fill_uniform(const tensor::ExecutionSpace& space, std::uint64_t key, double low, double high,
                  const tensor::Matrix<Scalar>& out) {
  const std::int64_t cols = static_cast<std::int64_t>(out.extent(1));
  Kokkos::parallel_for(
      "kpipe::kernels::fill_uniform",
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, out.extent(0) * out.extent(1)),
      KOKKOS_LAMBDA(std::int64_t e) {
        const auto i = e / cols;
        const auto j = e % cols;
        const auto counter = static_cast<std::uint64_t>(e);
        out(i, j) = static_cast<Scalar>(low + (high - low) * uniform01(key, counter));
      });
}

template <class Scalar>
void fill_normal(const tensor::ExecutionSpace& space, std::uint64_t key, std::int64_t first_row, double mean,
                 double stddev, const tensor::Matrix<Scalar>& out) {
  const std::int64_t cols = static_cast<std::int64_t>(out.extent(1));
  Kokkos::parallel_for(
      "kpipe::kernels::fill_normal",
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, out.extent(0) * out.extent(1)),
      KOKKOS_LAMBDA(std::int64_t e) {
        const auto i = e / cols;
        const auto j = e % cols;
        const auto counter = static_cast<std::uint64_t>(first_row * cols + e);
        // 1 - u lies in (0, 1], so the logarithm is finite.
        const double radius =
            tensor::compat::math::sqrt(-2.0 * tensor::compat::math::log(1.0 - uniform01(key, 2 * counter)));
        const double angle = 6.283185307179586 * uniform01(key, 2 * counter + 1);
        out(i, j) = static_cast<Scalar>(mean + stddev * radius * tensor::compat::math::cos(angle));
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                               \
  template void fill_uniform<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, double, double,              \
                                     const tensor::Matrix<Scalar>&);                                            \
  template void fill_normal<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, std::int64_t, double, double, \
                                    const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
