#pragma once
// kpipe's typed tensors are plain Kokkos Views (DESIGN.md §3) in the default
// execution space's memory; Matrix (rank 2, one row per sample) is the one
// every module uses. LayoutRight is explicit because these buffers cross MPI
// and HDF5, and CUDA's default layout would be LayoutLeft. Host copies exist
// only for I/O and tests.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kpipe::tensor {

using ExecutionSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecutionSpace::memory_space;

namespace detail {
template <class Scalar, int Rank>
struct add_pointers {
  using type = typename add_pointers<Scalar, Rank - 1>::type*;
};
template <class Scalar>
struct add_pointers<Scalar, 0> {
  using type = Scalar;
};
}  // namespace detail

// A row-major device View of rank Rank: View<float, 3> is Kokkos::View<float***, ...>.
template <class Scalar, int Rank>
using View = Kokkos::View<typename detail::add_pointers<Scalar, Rank>::type, Kokkos::LayoutRight, MemorySpace>;

// Spelled out, not View<Scalar, 2>, so that Scalar deduces from a Matrix argument.
template <class Scalar>
using Matrix = Kokkos::View<Scalar**, Kokkos::LayoutRight, MemorySpace>;
template <class Scalar>
using ConstMatrix = Kokkos::View<const Scalar**, Kokkos::LayoutRight, MemorySpace>;

// Class indices, one per sample (classification targets).
using Labels = Kokkos::View<int*, MemorySpace>;
using ConstLabels = Kokkos::View<const int*, MemorySpace>;

// Host staging that wraps a std::vector, for deep_copy to and from the device:
// rows x cols row-major values, and labels.
template <class Scalar>
using HostRows = Kokkos::View<Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using HostLabels = Kokkos::View<int*, typename Labels::array_layout, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

namespace detail {
// Keeps a template argument out of deduction, so that `gemm(..., C)` deduces
// Scalar from C alone and a Matrix converts to a ConstMatrix argument.
template <class T>
struct identity {
  using type = T;
};
}  // namespace detail
template <class T>
using identity_t = typename detail::identity<T>::type;

// A rows x cols matrix whose contents are undefined until written.
template <class Scalar>
Matrix<Scalar> uninitialized_matrix(const std::string& label, int rows, int cols) {
  return Matrix<Scalar>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), rows, cols);
}

// A rows x cols matrix of zeros.
template <class Scalar>
Matrix<Scalar> zero_matrix(const std::string& label, int rows, int cols) {
  return Matrix<Scalar>(label, rows, cols);
}

// A new matrix with the contents of `source`.
template <class Scalar>
Matrix<Scalar> clone(const std::string& label, const ConstMatrix<identity_t<Scalar>>& source) {
  auto copy =
      uninitialized_matrix<Scalar>(label, static_cast<int>(source.extent(0)), static_cast<int>(source.extent(1)));
  Kokkos::deep_copy(copy, source);
  return copy;
}

// Bytes of memory a matrix occupies.
template <class View>
std::size_t bytes(const View& view) {
  return view.span() * sizeof(typename View::value_type);
}

// "17x33", for messages.
template <class View>
std::string shape_string(const View& view) {
  return std::to_string(view.extent(0)) + "x" + std::to_string(view.extent(1));
}

namespace detail {
[[noreturn]] void throw_shape_mismatch(const char* what, const std::string& actual, std::size_t rows, std::size_t cols);
}

// Throws an input error naming `what` and both shapes unless `matrix` is rows x cols.
template <class View>
void require_shape(const char* what, const View& matrix, std::size_t rows, std::size_t cols) {
  if (matrix.extent(0) != rows || matrix.extent(1) != cols) {
    detail::throw_shape_mismatch(what, shape_string(matrix), rows, cols);
  }
}

// Row-major host copies, for tests, I/O and bitwise comparison.
template <class Scalar>
std::vector<Scalar> to_host(const ConstMatrix<identity_t<Scalar>>& matrix);
template <class Scalar>
void from_host(const std::vector<identity_t<Scalar>>& values, const Matrix<Scalar>& matrix);

}  // namespace kpipe::tensor
