#pragma once
// An element as kernels compute it (Scalar) into the type a layer keeps it
// in, and back: the same type, or for float bfloat16 and float16 under
// compute.precision (rounded as round_to rounds, widened exactly). Kernels
// that write or read a kept tensor in its stored type use these, so no
// float32 copy is made in between.

#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels::detail {

template <class Scalar>
KOKKOS_INLINE_FUNCTION void store(Scalar value, Scalar& into) {
  into = value;
}
KOKKOS_INLINE_FUNCTION void store(float value, tensor::BFloat16& into) { into = tensor::to_bfloat16(value); }
KOKKOS_INLINE_FUNCTION void store(float value, tensor::Half& into) { into = tensor::to_half(value); }

template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar load(Scalar stored) {
  return stored;
}
KOKKOS_INLINE_FUNCTION float load(tensor::BFloat16 stored) { return tensor::to_float(stored); }
KOKKOS_INLINE_FUNCTION float load(tensor::Half stored) { return tensor::to_float(stored); }

}  // namespace kpipe::kernels::detail
