#pragma once
// What the attention files share: operand checks, the softmax scale and the
// exponential both paths use, so that they compute the same probabilities.

#include <cmath>
#include <cstddef>

#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/fast_math.hpp"

namespace kpipe::kernels::detail {

constexpr bool host_memory = Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible;

// One team per score row: of one thread on the host, whose plain loops
// compilers vectorise (TeamThreadRange's runtime stride stops them), and of
// Kokkos' choice on GPUs, whose threads split the row.
using RowPolicy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using RowMember = RowPolicy::member_type;

inline RowPolicy row_policy(const tensor::ExecutionSpace& space, int rows) {
  return host_memory ? RowPolicy(space, rows, 1) : RowPolicy(space, rows, Kokkos::AUTO);
}

// f(j) for j in [0, n) over the team's threads.
template <class F>
KOKKOS_INLINE_FUNCTION void row_for(const RowMember& team, int n, const F& f) {
  if constexpr (host_memory) {
    (void)team;
    for (int j = 0; j < n; ++j) f(j);
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
  }
}

// Σ_j x[j] over [0, n) (ascending on the host) and max_j x[j] (n >= 1).
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar row_sum(const RowMember& team, int n, const Scalar* x) {
  Scalar result = 0;
  if constexpr (host_memory) {
    (void)team;
    for (int j = 0; j < n; ++j) result += x[j];
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n), [&](int j, Scalar& partial) { partial += x[j]; }, result);
  }
  return result;
}
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar row_max(const RowMember& team, int n, const Scalar* x) {
  Scalar result = x[0];
  if constexpr (host_memory) {
    (void)team;
    for (int j = 1; j < n; ++j) result = x[j] > result ? x[j] : result;
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n), [&](int j, Scalar& partial) { partial = x[j] > partial ? x[j] : partial; },
        Kokkos::Max<Scalar>(result));
  }
  return result;
}

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
