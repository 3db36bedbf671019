#include "kpipe/kernels/precision.hpp"

#include "flat.hpp"
#include "host_loops.hpp"

namespace kpipe::kernels {

namespace {

// Elements per host_loop call, as in elementwise.cpp.
constexpr std::int64_t grain = 4096;

KOKKOS_INLINE_FUNCTION void round(float x, tensor::BFloat16& y) { y = tensor::to_bfloat16(x); }
KOKKOS_INLINE_FUNCTION void round(float x, tensor::Half& y) { y = tensor::to_half(x); }

template <class Reduced>
void round_all(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
               const tensor::Matrix<Reduced>& Y) {
  tensor::require_shape("reduced-precision copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::round_to", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { round(x(e), y(e)); });
}

template <class Reduced>
void widen_all(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Reduced>& X,
               const tensor::Matrix<float>& Y) {
  tensor::require_shape("float32 copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::widen", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { y(e) = tensor::to_float(x(e)); });
}

template <class Reduced>
void sum_columns(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Reduced>& X,
                 const tensor::Matrix<float>& sums) {
  tensor::require_shape("column sums", sums, 1, X.extent(1));
  const int rows = static_cast<int>(X.extent(0));
  // The float32 kernel's blocking (elementwise.cpp): a block of columns per
  // host thread walking the rows, one column per GPU thread.
  constexpr int block = detail::host_memory ? 64 : 1;
  detail::for_each_block<block>(
      space, "kpipe::kernels::add_column_sums_reduced", static_cast<int>(X.extent(1)),
      KOKKOS_LAMBDA(int first, int width) {
        float sum[block] = {};
        for (int i = 0; i < rows; ++i) {
          const Reduced* row = &X(i, first);
          for (int j = 0; j < width; ++j) sum[j] += tensor::to_float(row[j]);
        }
        for (int j = 0; j < width; ++j) sums(0, first + j) += sum[j];
      });
}

}  // namespace

void round_to(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
              const tensor::Matrix<tensor::BFloat16>& Y) {
  round_all(space, X, Y);
}
void round_to(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
              const tensor::Matrix<tensor::Half>& Y) {
  round_all(space, X, Y);
}

void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
           const tensor::Matrix<float>& Y) {
  widen_all(space, X, Y);
}
void widen(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::Half>& X,
           const tensor::Matrix<float>& Y) {
  widen_all(space, X, Y);
}

void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                     const tensor::Matrix<float>& sums) {
  sum_columns(space, X, sums);
}
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::Half>& X,
                     const tensor::Matrix<float>& sums) {
  sum_columns(space, X, sums);
}

}  // namespace kpipe::kernels
