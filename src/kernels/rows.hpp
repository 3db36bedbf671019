#pragma once
// Kernels that work row by row (softmax, LayerNorm, head layouts): a team per
// row on GPUs, whose threads split the row; on the host, one thread per row
// with plain loops that compilers vectorise (TeamThreadRange's runtime stride
// stops them), in blocks of rows compiled per vector ISA (host_loops.hpp).
// The helpers take the row's team, or HostRow on the host.

#include <type_traits>

#include "host_loops.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels::detail {

using RowPolicy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using RowMember = RowPolicy::member_type;

// One host thread's row: no team, nothing to wait for.
struct HostRow {
  KOKKOS_INLINE_FUNCTION void team_barrier() const {}
};

// What a for_each_row body gets for its row.
using Row = std::conditional_t<host_memory, HostRow, RowMember>;

// A team per row: of one thread on the host, of Kokkos' choice on GPUs.
inline RowPolicy row_policy(const tensor::ExecutionSpace& space, int rows) {
  return host_memory ? RowPolicy(space, rows, 1) : RowPolicy(space, rows, Kokkos::AUTO);
}

// Host rows per host_loop call: enough that a call costs nothing, few
// enough to spread over threads.
constexpr int rows_per_block = 16;

// body(row, r) for every row r in [0, rows).
template <class Body>
void for_each_row(const tensor::ExecutionSpace& space, const char* name, int rows, const Body& body) {
  if constexpr (host_memory) {
    for_each(
        space, name, rows, rows_per_block, KOKKOS_LAMBDA(std::int64_t r) { body(HostRow{}, static_cast<int>(r)); });
  } else {
    Kokkos::parallel_for(
        tensor::compat::kernel_label(name), row_policy(space, rows),
        KOKKOS_LAMBDA(const RowMember& team) { body(team, team.league_rank()); });
  }
}

// Σ_r body(row, r) over rows r in [0, rows), each body a double: body runs
// as under for_each_row. Host: blocks of rows, each summed in one host_loop
// (vectorised per ISA), the blocks' sums reduced in Kokkos' order; GPUs: a
// team per row.
template <class Body>
double sum_over_rows(const tensor::ExecutionSpace& space, const char* name, int rows, const Body& body) {
  double total = 0;
  if constexpr (host_memory) {
    Kokkos::parallel_reduce(
        tensor::compat::kernel_label(name),
        Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, (rows + rows_per_block - 1) / rows_per_block),
        KOKKOS_LAMBDA(int block, double& partial) {
          const int begin = block * rows_per_block;
          double sum = 0;
          host_loop([&](std::int64_t r) { sum += body(HostRow{}, static_cast<int>(r)); }, begin,
                    rows - begin < rows_per_block ? rows : begin + rows_per_block);
          partial += sum;
        },
        total);
  } else {
    Kokkos::parallel_reduce(
        tensor::compat::kernel_label(name), row_policy(space, rows),
        KOKKOS_LAMBDA(const RowMember& team, double& partial) {
          const double term = body(team, team.league_rank());
          Kokkos::single(Kokkos::PerTeam(team), [&] { partial += term; });
        },
        total);
  }
  return total;
}

// f(j) for j in [0, n) over the row's threads.
template <class Team, class F>
KOKKOS_INLINE_FUNCTION void row_for(const Team& team, int n, const F& f) {
  if constexpr (host_memory) {
    (void)team;
    for (int j = 0; j < n; ++j) f(j);
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), f);
  }
}

// f() once per row.
template <class Team, class F>
KOKKOS_INLINE_FUNCTION void row_single(const Team& team, const F& f) {
  if constexpr (host_memory) {
    (void)team;
    f();
  } else {
    Kokkos::single(Kokkos::PerTeam(team), f);
  }
}

// Host reductions keep `lanes` partial results, lane l taking j ≡ l (mod
// lanes) in ascending order, then fold them pairwise: a fixed order that
// vectorises (one running sum cannot without reassociation) for any vector
// width up to 16 floats.
constexpr int lanes = 16;

// n rounded up to whole vectors of lanes, at most limit: how far a host loop
// over a row's first n entries may run, masking the rest, without a remainder.
KOKKOS_INLINE_FUNCTION int whole_lanes(int n, int limit) {
  const int rounded = (n + lanes - 1) / lanes * lanes;
  return rounded < limit ? rounded : limit;
}

// combine(a, b) over lanes partials: lane l + width into lane l, halving
// width. Each width a template argument: loops of known length unroll into
// vector halves instead of a loop over the stack.
template <int width = lanes / 2, class Scalar, class Combine>
KOKKOS_INLINE_FUNCTION Scalar fold_lanes(Scalar* partial, const Combine& combine) {
  for (int l = 0; l < width; ++l) partial[l] = combine(partial[l], partial[l + width]);
  if constexpr (width > 1) {
    return fold_lanes<width / 2>(partial, combine);
  } else {
    return partial[0];
  }
}

// Σ_j term(j) over [0, n).
template <class Team, class Term>
KOKKOS_INLINE_FUNCTION auto row_sum(const Team& team, int n, const Term& term) {
  using Scalar = std::remove_cv_t<std::remove_reference_t<decltype(term(0))>>;
  Scalar result = 0;
  if constexpr (host_memory) {
    (void)team;
    Scalar partial[lanes] = {};
    int j = 0;
    for (; j + lanes <= n; j += lanes) {
      for (int l = 0; l < lanes; ++l) partial[l] += term(j + l);
    }
    for (int l = 0; j + l < n; ++l) partial[l] += term(j + l);
    result = fold_lanes(partial, [](Scalar a, Scalar b) { return a + b; });
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n), [&](int j, Scalar& partial) { partial += term(j); }, result);
  }
  return result;
}

// max_j term(j) over [0, n), n >= 1.
template <class Team, class Term>
KOKKOS_INLINE_FUNCTION auto row_max(const Team& team, int n, const Term& term) {
  using Scalar = std::remove_cv_t<std::remove_reference_t<decltype(term(0))>>;
  Scalar result = term(0);
  if constexpr (host_memory) {
    (void)team;
    const auto larger = [](Scalar a, Scalar b) { return b > a ? b : a; };
    Scalar partial[lanes];
    for (int l = 0; l < lanes; ++l) partial[l] = result;
    int j = 0;
    for (; j + lanes <= n; j += lanes) {
      for (int l = 0; l < lanes; ++l) partial[l] = larger(partial[l], term(j + l));
    }
    for (int l = 0; j + l < n; ++l) partial[l] = larger(partial[l], term(j + l));
    result = fold_lanes(partial, larger);
  } else {
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](int j, Scalar& partial) {
          const Scalar x = term(j);
          partial = x > partial ? x : partial;
        },
        Kokkos::Max<Scalar>(result));
  }
  return result;
}

}  // namespace kpipe::kernels::detail
