#include "kpipe/kernels/precision.hpp"

#include <fmt/format.h>

#include "columns.hpp"
#include "flat.hpp"
#include "host_loops.hpp"
#include "kpipe/core/error.hpp"
#include "stored.hpp"

namespace kpipe::kernels {

namespace {

// Elements per host_loop call, as in elementwise.cpp.
constexpr std::int64_t grain = 4096;

template <class Reduced>
void round_all(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<float>& X,
               const tensor::Matrix<Reduced>& Y) {
  tensor::require_shape("reduced-precision copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::round_to", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { detail::store(x(e), y(e)); });
}

template <class Reduced>
void widen_all(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Reduced>& X,
               const tensor::Matrix<float>& Y) {
  tensor::require_shape("float32 copy", Y, X.extent(0), X.extent(1));
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::widen", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { y(e) = detail::load(x(e)); });
}

template <class Reduced>
void round_through_all(const tensor::ExecutionSpace& space, const tensor::Matrix<float>& X) {
  const auto x = detail::flat(X);
  detail::for_each(
      space, "kpipe::kernels::round_through", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) {
        Reduced y;
        detail::store(x(e), y);
        x(e) = detail::load(y);
      });
}

template <class Reduced>
void sum_columns(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Reduced>& X,
                 const tensor::Matrix<float>& sums) {
  tensor::require_shape("column sums", sums, 1, X.extent(1));
  constexpr int block = detail::column_block;
  detail::for_each_block<block>(
      space, "kpipe::kernels::add_column_sums_reduced", static_cast<int>(X.extent(1)),
      KOKKOS_LAMBDA(int first, int width) { detail::add_block_column_sums<block>(X, sums, first, width); });
}

}  // namespace

void detail::not_reduced(tensor::DType dtype, const char* what) {
  throw runtime_error(
      fmt::format("{}: {} is not a reduced-precision type (bfloat16, float16)", what, tensor::name_of(dtype)));
}

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

void round_through(const tensor::ExecutionSpace& space, const tensor::Matrix<float>& X, tensor::DType dtype) {
  if (dtype == tensor::DType::float32) return;
  with_reduced_type(dtype, "round_through", [&](auto type) { round_through_all<decltype(type)>(space, X); });
}

tensor::Tensor rounded(tensor::ExecContext& exec, const tensor::Tensor& X, tensor::DType dtype, const char* label) {
  if (X.spec().dtype() == dtype || X.empty()) return X;
  const auto source = X.matrix<float>();
  const tensor::Tensor copy = exec.pool().take(label, dtype, source.extent_int(0), source.extent_int(1));
  with_reduced_type(dtype, "rounded",
                    [&](auto type) { round_to(exec.space(), source, copy.matrix<decltype(type)>()); });
  return copy;
}

tensor::Tensor widened(tensor::ExecContext& exec, const tensor::Tensor& X, const char* label) {
  const tensor::DType dtype = X.spec().dtype();
  if ((dtype != tensor::DType::bfloat16 && dtype != tensor::DType::float16) || X.empty()) return X;
  const tensor::Tensor wide = exec.pool().take(label, tensor::DType::float32, static_cast<int>(X.spec().extent(0)),
                                               static_cast<int>(X.spec().extent(1)));
  with_reduced_type(dtype, "widened",
                    [&](auto type) { widen(exec.space(), X.matrix<decltype(type)>(), wide.matrix<float>()); });
  return wide;
}

}  // namespace kpipe::kernels
