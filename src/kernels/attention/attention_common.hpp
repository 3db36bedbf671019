#pragma once
// What the attention files share: operand checks, the softmax scale and the
// exponential both paths use, so that they compute the same probabilities.

#include <cmath>
#include <cstddef>

#include "../rows.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/detail/fast_math.hpp"

namespace kpipe::kernels::detail {

// Throws an input error unless tokens and head_dim are positive and
// batch_heads is not negative (attention_layout.cpp).
void check_attention_shape(const AttentionShape& shape);

// Rows of a heads-major stack: one per (sequence, head, position).
inline std::size_t stack_rows(const AttentionShape& shape) {
  return static_cast<std::size_t>(shape.batch_heads) * static_cast<std::size_t>(shape.tokens);
}

// Throws an input error naming `what` unless `matrix` is a stack of `shape`.
template <class View>
void require_stack(const char* what, const View& matrix, const AttentionShape& shape) {
  tensor::require_shape(what, matrix, stack_rows(shape), static_cast<std::size_t>(shape.head_dim));
}

// 1/sqrt(hd), rounded once on the host.
template <class Scalar>
Scalar softmax_scale(const AttentionShape& shape) {
  return static_cast<Scalar>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
}

// fast_math's exp for float keeps the softmax loops vectorised; double gets
// the accurate one, which the double reference and gradient checks need.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar softmax_exp(Scalar x) {
  return fast_math::exp(x);
}

}  // namespace kpipe::kernels::detail
