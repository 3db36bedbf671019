#include "kpipe/kernels/loss.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/detail/fast_math.hpp"
#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"

namespace kpipe::kernels {

namespace {

using Range = Kokkos::RangePolicy<tensor::ExecutionSpace>;

// A row's gradient scale · (softmax − one-hot) from its exponentials in dz,
// `inverse` one over their sum and `label` the label's column (any other
// value where the row holds no label). The plain and the vocabulary-parallel
// losses share it, so that on one rank they agree bitwise.
template <class Row, class Scalar>
KOKKOS_INLINE_FUNCTION void gradient_row(const Row& row, int columns, Scalar inverse, Scalar scale, int label,
                                         Scalar* dz) {
  detail::row_for(row, columns,
                  [&](int j) { dz[j] = scale * (dz[j] * inverse - (j == label ? Scalar(1) : Scalar(0))); });
}

// An ignored label's row: no loss, and a zero gradient.
template <class Row, class Scalar>
KOKKOS_INLINE_FUNCTION double ignored_row(const Row& row, int columns, Scalar* dz) {
  detail::row_for(row, columns, [&](int j) { dz[j] = Scalar(0); });
  return 0.0;
}

}  // namespace

template <class Scalar>
double softmax_cross_entropy(const tensor::ExecutionSpace& space,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                             const tensor::ConstLabels& labels, tensor::identity_t<Scalar> scale,
                             const tensor::Matrix<Scalar>& dlogits) {
  const int rows = static_cast<int>(logits.extent(0));
  const int classes = static_cast<int>(logits.extent(1));
  if (labels.extent(0) != logits.extent(0)) {
    throw input_error(
        fmt::format("{} labels for {} logits; give one label per row", labels.extent(0), tensor::shape_string(logits)));
  }
  tensor::require_shape("logit gradient", dlogits, rows, classes);
  return detail::sum_over_rows(
      space, "kpipe::kernels::softmax_cross_entropy", rows, KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const Scalar* const z = &logits(i, 0);
        Scalar* const dz = &dlogits(i, 0);
        if (labels(i) == ignored_label) return ignored_row(row, classes, dz);
        const Scalar max = detail::row_max(row, classes, [&](int j) { return z[j]; });
        // The gradient holds the exponentials until their sum is known: one exponential per logit.
        const Scalar sum = detail::row_sum(row, classes, [&](int j) {
          const Scalar e = fast_math::exp(z[j] - max);
          dz[j] = e;
          return e;
        });
        row.team_barrier();
        const int label = labels(i);
        gradient_row(row, classes, Scalar(1) / sum, scale, label, dz);
        return label >= 0 && label < classes
                   ? static_cast<double>(scale * (max + tensor::compat::math::log(sum) - z[label]))
                   : tensor::compat::quiet_nan<double>();
      });
}

template <class Scalar>
double mean_squared_error(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& targets,
                          tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY) {
  const int rows = static_cast<int>(Y.extent(0));
  const int outputs = static_cast<int>(Y.extent(1));
  tensor::require_shape("regression targets", targets, rows, outputs);
  tensor::require_shape("output gradient", dY, rows, outputs);
  double loss = 0;
  Kokkos::parallel_reduce(
      tensor::compat::kernel_label("kpipe::kernels::mean_squared_error"), Range(space, 0, rows),
      KOKKOS_LAMBDA(int i, double& partial) {
        Scalar sum = 0;
        for (int j = 0; j < outputs; ++j) {
          const Scalar error = Y(i, j) - targets(i, j);
          sum += error * error;
          dY(i, j) = scale * Scalar(2) * error / Scalar(outputs);
        }
        partial += static_cast<double>(scale * sum / Scalar(outputs));
      },
      loss);
  return loss;
}

namespace {

// The largest of row i's shard maxima.
template <class Maxima>
KOKKOS_INLINE_FUNCTION auto largest(const Maxima& maxima, int i) {
  auto m = maxima(i, 0);
  for (int r = 1; r < static_cast<int>(maxima.extent(1)); ++r) m = maxima(i, r) > m ? maxima(i, r) : m;
  return m;
}

}  // namespace

template <class Scalar>
void vocab_shard_max(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                     int rank, const tensor::Matrix<Scalar>& maxima) {
  const int rows = static_cast<int>(logits.extent(0));
  const int columns = static_cast<int>(logits.extent(1));
  const int ranks = static_cast<int>(maxima.extent(1));
  tensor::require_shape("shard maxima", maxima, rows, ranks);
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::vocab_shard_max"), Range(space, 0, rows), KOKKOS_LAMBDA(int i) {
        Scalar max = logits(i, 0);
        for (int j = 1; j < columns; ++j) max = logits(i, j) > max ? logits(i, j) : max;
        for (int r = 0; r < ranks; ++r) maxima(i, r) = r == rank ? max : Scalar(0);
      });
}

template <class Scalar>
void vocab_shard_sums(const tensor::ExecutionSpace& space,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& maxima, const tensor::ConstLabels& labels,
                      int first, const tensor::Matrix<Scalar>& sums) {
  const int rows = static_cast<int>(logits.extent(0));
  const int columns = static_cast<int>(logits.extent(1));
  tensor::require_shape("shard sums", sums, rows, 2);
  detail::for_each_row(
      space, "kpipe::kernels::vocab_shard_sums", rows, KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const Scalar* const z = &logits(i, 0);
        const Scalar max = largest(maxima, i);
        const Scalar sum = detail::row_sum(row, columns, [&](int j) { return fast_math::exp(z[j] - max); });
        const int local = labels(i) - first;
        detail::row_single(row, [&] {
          sums(i, 0) = sum;
          sums(i, 1) = local >= 0 && local < columns ? z[local] : Scalar(0);
        });
      });
}

template <class Scalar>
double vocab_shard_loss(const tensor::ExecutionSpace& space,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& maxima,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sums, const tensor::ConstLabels& labels,
                        int first, int vocab, tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dlogits) {
  const int rows = static_cast<int>(logits.extent(0));
  const int columns = static_cast<int>(logits.extent(1));
  if (labels.extent(0) != logits.extent(0)) {
    throw input_error(
        fmt::format("{} labels for {} logits; give one label per row", labels.extent(0), tensor::shape_string(logits)));
  }
  tensor::require_shape("logit gradient", dlogits, rows, columns);
  return detail::sum_over_rows(
      space, "kpipe::kernels::vocab_shard_loss", rows, KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const Scalar* const z = &logits(i, 0);
        Scalar* const dz = &dlogits(i, 0);
        if (labels(i) == ignored_label) return ignored_row(row, columns, dz);
        const Scalar max = largest(maxima, i);
        detail::row_for(row, columns, [&](int j) { dz[j] = fast_math::exp(z[j] - max); });
        row.team_barrier();
        const int label = labels(i);
        gradient_row(row, columns, Scalar(1) / sums(i, 0), scale, label - first, dz);
        return label >= 0 && label < vocab
                   ? static_cast<double>(scale * (max + tensor::compat::math::log(sums(i, 0)) - sums(i, 1)))
                   : tensor::compat::quiet_nan<double>();
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                   \
  template double softmax_cross_entropy<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,  \
                                                const tensor::ConstLabels&, Scalar, const tensor::Matrix<Scalar>&); \
  template double mean_squared_error<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,     \
                                             const tensor::ConstMatrix<Scalar>&, Scalar,                            \
                                             const tensor::Matrix<Scalar>&);                                        \
  template void vocab_shard_max<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, int,     \
                                        const tensor::Matrix<Scalar>&);                                             \
  template void vocab_shard_sums<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,         \
                                         const tensor::ConstMatrix<Scalar>&, const tensor::ConstLabels&, int,       \
                                         const tensor::Matrix<Scalar>&);                                            \
  template double vocab_shard_loss<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,       \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,  \
                                           const tensor::ConstLabels&, int, int, Scalar,                            \
                                           const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
