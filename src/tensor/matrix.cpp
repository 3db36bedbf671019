#include "kpipe/tensor/matrix.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"

namespace kpipe::tensor {

namespace detail {
void throw_shape_mismatch(const char* what, const std::string& actual, std::size_t rows, std::size_t cols) {
  throw input_error(fmt::format("{} is {} but must be {}x{}", what, actual, rows, cols));
}
}  // namespace detail

template <class Scalar>
std::vector<Scalar> to_host(const ConstMatrix<identity_t<Scalar>>& matrix) {
  const auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), matrix);
  std::vector<Scalar> values;
  values.reserve(matrix.extent(0) * matrix.extent(1));
  for (std::size_t i = 0; i < mirror.extent(0); ++i) {
    for (std::size_t j = 0; j < mirror.extent(1); ++j) values.push_back(mirror(i, j));
  }
  return values;
}

template <class Scalar>
void from_host(const std::vector<identity_t<Scalar>>& values, const Matrix<Scalar>& matrix) {
  if (values.size() != matrix.extent(0) * matrix.extent(1)) {
    throw input_error(fmt::format("{} host values cannot fill a {} matrix", values.size(), shape_string(matrix)));
  }
  auto mirror = Kokkos::create_mirror_view(matrix);
  std::size_t next = 0;
  for (std::size_t i = 0; i < mirror.extent(0); ++i) {
    for (std::size_t j = 0; j < mirror.extent(1); ++j) mirror(i, j) = values[next++];
  }
  Kokkos::deep_copy(matrix, mirror);
}

#define KPIPE_INSTANTIATE(Scalar)                                           \
  template std::vector<Scalar> to_host<Scalar>(const ConstMatrix<Scalar>&); \
  template void from_host<Scalar>(const std::vector<Scalar>&, const Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::tensor
