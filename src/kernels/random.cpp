#include "kpipe/kernels/random.hpp"

#include <type_traits>

#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"

namespace kpipe::kernels {

namespace {

// Uniform in (0, 1], so that its logarithm is finite: 53 random bits for
// double, 24 for float, each value exact in the type.
template <class Real>
KOKKOS_INLINE_FUNCTION Real uniform_open(std::uint64_t key, std::uint64_t counter) {
  if constexpr (std::is_same_v<Real, float>) {
    return static_cast<float>((random_bits(key, counter) >> 40) + 1) * 0x1.0p-24f;
  } else {
    return static_cast<double>((random_bits(key, counter) >> 11) + 1) * 0x1.0p-53;
  }
}

}  // namespace

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
  namespace math = tensor::compat::math;
  const int cols = static_cast<int>(out.extent(1));
  const auto shift = static_cast<Scalar>(mean), scale = static_cast<Scalar>(stddev);
  // Row by row, so no element divides its index by the row length. A row
  // that starts (or ends) inside a pair computes the pair for its one value.
  detail::for_each_row(
      space, "kpipe::kernels::fill_normal", static_cast<int>(out.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const std::int64_t start = (first_row + i) * cols;  // stream number of out(i, 0)
        const std::int64_t first_pair = start / 2;
        const int pairs = static_cast<int>((start + cols + 1) / 2 - first_pair);
        detail::row_for(row, pairs, [&](int p) {
          const auto pair = static_cast<std::uint64_t>(first_pair + p);
          const Scalar radius = math::sqrt(Scalar(-2) * math::log(uniform_open<Scalar>(key, 2 * pair)));
          const Scalar angle = Scalar(6.283185307179586) * uniform_open<Scalar>(key, 2 * pair + 1);
          const int j = static_cast<int>(2 * (first_pair + p) - start);  // column of value 2 * pair
          if (j >= 0) out(i, j) = shift + scale * (radius * math::cos(angle));
          if (j + 1 < cols) out(i, j + 1) = shift + scale * (radius * math::sin(angle));
        });
      });
}

template <class Scalar>
void add_random_rows(const tensor::ExecutionSpace& space, std::uint64_t key, std::int64_t first_row,
                     const tensor::ConstMatrix<Scalar>& table, const tensor::Matrix<Scalar>& out) {
  const auto choices = static_cast<std::uint64_t>(table.extent(0));
  const int cols = static_cast<int>(out.extent(1));
  detail::for_each_row(
      space, "kpipe::kernels::add_random_rows", static_cast<int>(out.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const auto chosen = static_cast<int>(random_bits(key, static_cast<std::uint64_t>(first_row + i)) % choices);
        detail::row_for(row, cols, [&](int j) { out(i, j) += table(chosen, j); });
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                               \
  template void fill_uniform<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, double, double,              \
                                     const tensor::Matrix<Scalar>&);                                            \
  template void fill_normal<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, std::int64_t, double, double, \
                                    const tensor::Matrix<Scalar>&);                                             \
  template void add_random_rows<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, std::int64_t,             \
                                        const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
