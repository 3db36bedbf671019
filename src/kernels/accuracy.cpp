#include "kpipe/kernels/accuracy.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

template <class Scalar>
std::int64_t count_correct(const tensor::ExecutionSpace& space,
                           const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                           const tensor::ConstLabels& labels) {
  if (labels.extent(0) != logits.extent(0)) {
    throw input_error(
        fmt::format("{} labels for {} logits; give one label per row", labels.extent(0), tensor::shape_string(logits)));
  }
  const int classes = static_cast<int>(logits.extent(1));
  std::int64_t correct = 0;
  Kokkos::parallel_reduce(
      tensor::compat::kernel_label("kpipe::kernels::count_correct"),
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, logits.extent(0)),
      KOKKOS_LAMBDA(int i, std::int64_t& partial) {
        int best = 0;
        for (int j = 1; j < classes; ++j) best = logits(i, j) > logits(i, best) ? j : best;
        partial += best == labels(i) ? 1 : 0;
      },
      correct);
  return correct;
}

template std::int64_t count_correct<float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&,
                                           const tensor::ConstLabels&);
template std::int64_t count_correct<double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&,
                                            const tensor::ConstLabels&);

}  // namespace kpipe::kernels
