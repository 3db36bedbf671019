#include "kpipe/kernels/precision.hpp"

#include "flat.hpp"
#include "host_loops.hpp"

namespace kpipe::kernels {

namespace {
// Elements per host_loop call, as in elementwise.cpp.
constexpr std::int64_t grain = 4096;
}  // namespace

void round_to_bfloat16(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
                       const tensor::Matrix<tensor::BFloat16>& Y) {
  tensor::require_shape("bfloat16 copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::round_to_bfloat16", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { y(e) = tensor::to_bfloat16(x(e)); });
}

void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
           const tensor::Matrix<float>& Y) {
  tensor::require_shape("float32 copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::widen", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { y(e) = tensor::to_float(x(e)); });
}

void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                     const tensor::Matrix<float>& sums) {
  tensor::require_shape("column sums", sums, 1, X.extent(1));
  const int rows = static_cast<int>(X.extent(0));
  // The float32 kernel's blocking (elementwise.cpp): a block of columns per
  // host thread walking the rows, one column per GPU thread.
  constexpr int block = detail::host_memory ? 64 : 1;
  detail::for_each_block<block>(
      space, "kpipe::kernels::add_column_sums_bf16", static_cast<int>(X.extent(1)),
      KOKKOS_LAMBDA(int first, int width) {
        float sum[block] = {};
        for (int i = 0; i < rows; ++i) {
          const tensor::BFloat16* row = &X(i, first);
          for (int j = 0; j < width; ++j) sum[j] += tensor::to_float(row[j]);
        }
        for (int j = 0; j < width; ++j) sums(0, first + j) += sum[j];
      });
}

}  // namespace kpipe::kernels
