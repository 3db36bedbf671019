#pragma once
// A contiguous matrix seen as one flat array, so that elementwise kernels
// index memory directly instead of dividing by the row length.

#include <string>

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels::detail {

[[noreturn]] void throw_not_contiguous(const std::string& label);

template <class Scalar>
using Flat = Kokkos::View<Scalar*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class Scalar, class... Properties>
Flat<Scalar> flat(const Kokkos::View<Scalar**, Properties...>& matrix) {
  if (!matrix.span_is_contiguous()) throw_not_contiguous(matrix.label());
  return Flat<Scalar>(matrix.data(), matrix.span());
}

}  // namespace kpipe::kernels::detail
