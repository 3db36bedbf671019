#include "kpipe/kernels/random.hpp"

#include <type_traits>

#include "kpipe/kernels/detail/fast_math.hpp"
#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"

namespace kpipe::kernels {

namespace {

// Uniform in (0, 1], so that its logarithm is finite: 53 random bits for
// double, 24 for float, each value exact in the type.
template <class Real>
KOKKOS_INLINE_FUNCTION Real uniform_open(std::uint64_t key, std::uint64_t counter) {
  if constexpr (std::is_same_v<Real, float>) {
    // Through int32 (the value is at most 2^24): vector ISAs before AVX-512 convert no 64-bit integers.
    return static_cast<float>(static_cast<std::int32_t>(random_bits(key, counter) >> 40) + 1) * 0x1.0p-24f;
  } else {
    return static_cast<double>((random_bits(key, counter) >> 11) + 1) * 0x1.0p-53;
  }
}

// Values 2q and 2q + 1 of stream `key` (shifted and scaled): r cos and
// r sin of Box-Muller pair q.
template <class Scalar>
KOKKOS_INLINE_FUNCTION void normal_pair(std::uint64_t key, std::int64_t pair, Scalar shift, Scalar scale, Scalar& first,
                                        Scalar& second) {
  const auto q = static_cast<std::uint64_t>(pair);
  const Scalar radius = fast_math::sqrt(Scalar(-2) * fast_math::log(uniform_open<Scalar>(key, 2 * q)));
  Scalar sine, cosine;
  fast_math::sincos_turns(uniform_open<Scalar>(key, 2 * q + 1), sine, cosine);
  first = shift + scale * (radius * cosine);
  second = shift + scale * (radius * sine);
}

// What fill_normal adds to its values: nothing.
template <class Scalar>
struct NoCentre {
  KOKKOS_INLINE_FUNCTION Scalar operator()(int /*j*/, Scalar value) const { return value; }
};
template <class Scalar>
struct NoCentres {
  KOKKOS_INLINE_FUNCTION NoCentre<Scalar> row(int /*i*/) const { return {}; }
};

// What fill_normal_around adds: row i's randomly chosen centre.
template <class Scalar>
struct Centre {
  tensor::ConstMatrix<Scalar> centres;
  int chosen;
  KOKKOS_INLINE_FUNCTION Scalar operator()(int j, Scalar value) const { return centres(chosen, j) + value; }
};
template <class Scalar>
struct RandomCentres {
  tensor::ConstMatrix<Scalar> centres;
  std::uint64_t key;
  std::int64_t first_row;
  KOKKOS_INLINE_FUNCTION Centre<Scalar> row(int i) const {
    const auto choices = static_cast<std::uint64_t>(centres.extent(0));
    return {centres, static_cast<int>(random_bits(key, static_cast<std::uint64_t>(first_row + i)) % choices)};
  }
};

// out(i, j) = centre_i(j, value (i, j) of the normal stream), row by row, so
// no element divides its index by the row length. The pairs wholly inside a
// row store both values unconditionally (a loop that vectorizes); a row that
// starts or ends inside a pair takes its one value.
template <class Scalar, class Centres>
void normal_rows(const tensor::ExecutionSpace& space, const char* name, std::uint64_t key, std::int64_t first_row,
                 double mean, double stddev, const Centres& centres, const tensor::Matrix<Scalar>& out) {
  const int cols = static_cast<int>(out.extent(1));
  const auto shift = static_cast<Scalar>(mean), scale = static_cast<Scalar>(stddev);
  detail::for_each_row(
      space, name, static_cast<int>(out.extent(0)), KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const auto centre = centres.row(i);
        const std::int64_t start = (first_row + i) * cols;  // stream number of out(i, 0)
        const int head = static_cast<int>(start & 1);       // out(i, 0) is the second value of a pair
        const int pairs = (cols - head) / 2;
        const std::int64_t first_pair = (start + head) / 2;
        detail::row_for(row, pairs, [&](int p) {
          const int j = head + 2 * p;
          Scalar first, second;
          normal_pair(key, first_pair + p, shift, scale, first, second);
          out(i, j) = centre(j, first);
          out(i, j + 1) = centre(j + 1, second);
        });
        detail::row_single(row, [&] {
          Scalar first, second;
          if (head) {
            normal_pair(key, start / 2, shift, scale, first, second);
            out(i, 0) = centre(0, second);
          }
          if (head + 2 * pairs < cols) {
            normal_pair(key, first_pair + pairs, shift, scale, first, second);
            out(i, cols - 1) = centre(cols - 1, first);
          }
        });
      });
}

}  // namespace

template <class Scalar>
void fill_uniform(const tensor::ExecutionSpace& space, std::uint64_t key, double low, double high,
                  const tensor::Matrix<Scalar>& out) {
  const std::int64_t cols = static_cast<std::int64_t>(out.extent(1));
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::fill_uniform"),
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
  normal_rows(space, "kpipe::kernels::fill_normal", key, first_row, mean, stddev, NoCentres<Scalar>{}, out);
}

template <class Scalar>
void fill_normal_around(const tensor::ExecutionSpace& space, std::uint64_t key, std::int64_t first_row,
                        std::uint64_t choice_key, const tensor::ConstMatrix<Scalar>& centres,
                        const tensor::Matrix<Scalar>& out) {
  normal_rows(space, "kpipe::kernels::fill_normal_around", key, first_row, 0.0, 1.0,
              RandomCentres<Scalar>{centres, choice_key, first_row}, out);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                     \
  template void fill_uniform<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, double, double,                    \
                                     const tensor::Matrix<Scalar>&);                                                  \
  template void fill_normal<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, std::int64_t, double, double,       \
                                    const tensor::Matrix<Scalar>&);                                                   \
  template void fill_normal_around<Scalar>(const tensor::ExecutionSpace&, std::uint64_t, std::int64_t, std::uint64_t, \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
