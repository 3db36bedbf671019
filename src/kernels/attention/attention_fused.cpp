// The fused attention path, flash-attention style: one team per (sequence·head,
// tile of `tile` rows). Forward stages its query tile, then streams the key and
// value tiles up to the diagonal (from the tile holding the first key of the
// query tile's first document, where documents are packed) through team
// scratch and keeps a running maximum and sum per query (online softmax), so
// the T x T scores never exist; it writes O and L = log-sum-exp. Backward
// recomputes each probability as exp(s - L) and needs D = rowsum(dO ∘ O); dQ
// is one kernel over query tiles and dK, dV one over key tiles, so every
// output row is summed by one thread in a fixed order: no atomics, bitwise
// reproducible.
//
// A thread owns whole rows of a tile. Its products run as axpys along the
// inner loop (s_j += q_d k_j,d over d outer, j inner), with the other operand
// staged transposed where that keeps the inner loop contiguous, so host
// compilers vectorise them without reassociating sums; on GPUs the inner loops
// spread over vector lanes. A score is always Σ_d (scale q_d) k_d in ascending
// d, in every kernel, so backward recomputes forward's scores bit for bit.
#include "attention_common.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {

// Query and key rows per tile.
constexpr int tile = 32;

using Policy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using Member = Policy::member_type;
using Scratch = tensor::ExecutionSpace::scratch_memory_space;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
template <class Scalar>
using Tile = Kokkos::View<Scalar**, Kokkos::LayoutRight, Scratch, Unmanaged>;
template <class Scalar>
using Column = Kokkos::View<Scalar*, Scratch, Unmanaged>;

using detail::host_memory;

// The scratch a team needs, counted as the views are declared; each view may
// be padded up to the scratch alignment.
template <class Scalar>
struct ScratchSize {
  std::size_t bytes = 0;
  void tiles(int count, int rows, int cols) { bytes += count * (Tile<Scalar>::shmem_size(rows, cols) + 128); }
  void columns(int count, int rows) { bytes += count * (Column<Scalar>::shmem_size(rows) + 128); }
};

// The first key of the tile holding key `key`.
KOKKOS_INLINE_FUNCTION int first_tile(int key) { return key / tile * tile; }

// Host: one thread per team walks the tile's rows. GPU: one thread per row,
// vector lanes along keys or features. Scratch goes to level 0 (shared memory)
// when it fits, else to level 1, so large head sizes in double still run.
struct Launch {
  Policy policy;
  int level;
};
Launch launch(const tensor::ExecutionSpace& space, int league, std::size_t scratch) {
  Policy policy = host_memory ? Policy(space, league, 1) : Policy(space, league, tile, 8);
  const int level = scratch <= static_cast<std::size_t>(Policy::scratch_size_max(0)) ? 0 : 1;
  policy.set_scratch_size(level, Kokkos::PerTeam(scratch));
  return {policy, level};
}

// A thread's loop over [first, last): vector lanes on GPUs, a plain loop on
// the host, where ThreadVectorRange's runtime stride keeps compilers from
// vectorising.
template <class F>
KOKKOS_INLINE_FUNCTION void vector_for(const Member& team, int first, int last, const F& f) {
  if constexpr (host_memory) {
    (void)team;
    for (int i = first; i < last; ++i) f(i);
  } else {
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, first, last), f);
  }
}

// max_j x[j] over [0, n), n >= 1.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar vector_max(const Member& team, int n, const Scalar* x) {
  Scalar result = x[0];
  if constexpr (host_memory) {
    (void)team;
    for (int j = 1; j < n; ++j) result = x[j] > result ? x[j] : result;
  } else {
    Kokkos::parallel_reduce(
        Kokkos::ThreadVectorRange(team, n), [&](int j, Scalar& partial) { partial = x[j] > partial ? x[j] : partial; },
        Kokkos::Max<Scalar>(result));
  }
  return result;
}

// Σ_j x[j] over [0, n), ascending on the host.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar vector_sum(const Member& team, int n, const Scalar* x) {
  Scalar result = 0;
  if constexpr (host_memory) {
    (void)team;
    for (int j = 0; j < n; ++j) result += x[j];
  } else {
    Kokkos::parallel_reduce(
        Kokkos::ThreadVectorRange(team, n), [&](int j, Scalar& partial) { partial += x[j]; }, result);
  }
  return result;
}

// out(r, c) = scale · source(row0 + r, c) for r < rows, or its transpose (out(c, r)).
template <bool Transposed, class Scalar, class Source>
KOKKOS_INLINE_FUNCTION void stage(const Member& team, const Source& source, int row0, int rows, Scalar scale,
                                  const Tile<Scalar>& out) {
  const int cols = static_cast<int>(source.extent(1));
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    vector_for(team, 0, cols, [&](int c) { (Transposed ? out(c, r) : out(r, c)) = scale * source(row0 + r, c); });
  });
}

// out[i] += Σ_k a[k] y[k·ld + i] for i in [first, last), k ascending over
// [k_begin, k_end): four k per pass, so that out is loaded and stored once per
// four products while every out[i] still adds them one by one in k order.
// Raw pointers, not views: through a view compilers reload its data pointer
// after every store and do not vectorise.
template <class Scalar>
KOKKOS_INLINE_FUNCTION void multiply_add(const Member& team, int k_begin, int k_end, const Scalar* a, const Scalar* y,
                                         int ld, int first, int last, Scalar* out) {
  int k = k_begin;
  for (; k + 4 <= k_end; k += 4) {
    const Scalar a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
    const Scalar* const y0 = y + k * ld;
    const Scalar* const y1 = y0 + ld;
    const Scalar* const y2 = y1 + ld;
    const Scalar* const y3 = y2 + ld;
    vector_for(team, first, last, [&](int i) {
      Scalar o = out[i];
      o += a0 * y0[i];
      o += a1 * y1[i];
      o += a2 * y2[i];
      o += a3 * y3[i];
      out[i] = o;
    });
  }
  for (; k < k_end; ++k) {
    const Scalar ak = a[k];
    const Scalar* const yk = y + k * ld;
    vector_for(team, first, last, [&](int i) { out[i] += ak * yk[i]; });
  }
}

// s(row, j) = Σ_d x(row, d) yT(d, j) for j in [first, last), d ascending.
template <class Scalar>
KOKKOS_INLINE_FUNCTION void row_products(const Member& team, const Tile<Scalar>& x, int row, const Tile<Scalar>& yT,
                                         int first, int last, const Tile<Scalar>& s) {
  Scalar* const out = &s(row, 0);
  vector_for(team, first, last, [&](int j) { out[j] = Scalar(0); });
  multiply_add(team, 0, static_cast<int>(x.extent(1)), &x(row, 0), yT.data(), static_cast<int>(yT.stride(0)), first,
               last, out);
}

// acc(row, d) += Σ_j w(row, j) y(j, d) for j in [first, last), j ascending.
template <class Scalar>
KOKKOS_INLINE_FUNCTION void accumulate_rows(const Member& team, const Tile<Scalar>& w, int row, const Tile<Scalar>& y,
                                            int first, int last, const Tile<Scalar>& acc) {
  multiply_add(team, first, last, &w(row, 0), y.data(), static_cast<int>(y.stride(0)), 0,
               static_cast<int>(acc.extent(1)), &acc(row, 0));
}

template <class Scalar>
KOKKOS_INLINE_FUNCTION void zero_rows(const Member& team, int rows, const Tile<Scalar>& acc) {
  const int features = static_cast<int>(acc.extent(1));
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    Scalar* const out = &acc(r, 0);
    vector_for(team, 0, features, [&](int d) { out[d] = Scalar(0); });
  });
}

}  // namespace

template <class Scalar>
void attention_forward_fused(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V, const tensor::Matrix<Scalar>& O,
                             const tensor::Matrix<Scalar>& L) {
  detail::check_attention_shape(shape);
  detail::require_stack("attention queries", Q, shape);
  detail::require_stack("attention keys", K, shape);
  detail::require_stack("attention values", V, shape);
  detail::require_stack("attention output", O, shape);
  tensor::require_shape("attention log-sum-exp", L, detail::stack_rows(shape), 1);
  if (shape.batch_heads == 0) return;
  const int T = shape.tokens;
  const int hd = shape.head_dim;
  const int tiles = (T + tile - 1) / tile;
  const Scalar scale = detail::softmax_scale<Scalar>(shape);
  const DocumentMask documents = shape.documents;

  ScratchSize<Scalar> size;
  size.tiles(3, tile, hd);    // q (scaled), v, acc
  size.tiles(1, hd, tile);    // kT
  size.tiles(1, tile, tile);  // s, then p
  size.columns(2, tile);      // running max and sum
  const Launch forward = launch(space, shape.batch_heads * tiles, size.bytes);
  const int level = forward.level;

  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_forward_fused"), forward.policy,
      KOKKOS_LAMBDA(const Member& team) {
        const int base = team.league_rank() / tiles * T;  // first stack row of this sequence·head
        const int q0 = team.league_rank() % tiles * tile;
        const int queries = tensor::compat::min(tile, T - q0);
        const Tile<Scalar> q(team.team_scratch(level), tile, hd);
        const Tile<Scalar> v(team.team_scratch(level), tile, hd);
        const Tile<Scalar> acc(team.team_scratch(level), tile, hd);
        const Tile<Scalar> kT(team.team_scratch(level), hd, tile);
        const Tile<Scalar> s(team.team_scratch(level), tile, tile);
        const Column<Scalar> row_max(team.team_scratch(level), tile);
        const Column<Scalar> row_sum(team.team_scratch(level), tile);

        stage<false>(team, Q, base + q0, queries, scale, q);
        zero_rows(team, queries, acc);
        // Causal: key tiles up to the one holding the last query of this tile,
        // from the one holding the first key of its first query.
        const int end = q0 + queries;
        for (int k0 = first_tile(documents.first_key(base + q0, T)); k0 < end; k0 += tile) {
          const int keys = tensor::compat::min(tile, end - k0);
          team.team_barrier();
          stage<true>(team, K, base + k0, keys, Scalar(1), kT);
          stage<false>(team, V, base + k0, keys, Scalar(1), v);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
            // Keys max(k0, first) .. q0 + i of this tile; the query's first
            // tile starts its running maximum and sum.
            const int first = documents.first_key(base + q0 + i, T);
            const int lo = tensor::compat::max(0, first - k0);
            const int hi = tensor::compat::min(keys, q0 + i - k0 + 1);
            if (lo >= hi) return;
            const bool opens = k0 == first_tile(first);
            row_products(team, q, i, kT, lo, hi, s);
            Scalar* const p = &s(i, 0);
            const Scalar tile_max = vector_max(team, hi - lo, p + lo);
            const Scalar new_max = opens ? tile_max : tensor::compat::max(row_max(i), tile_max);
            // Rescales what earlier tiles summed against the old maximum.
            const Scalar correction = opens ? Scalar(0) : detail::softmax_exp(row_max(i) - new_max);
            vector_for(team, lo, hi, [&](int j) { p[j] = detail::softmax_exp(p[j] - new_max); });
            const Scalar tile_sum = vector_sum(team, hi - lo, p + lo);
            Scalar* const out = &acc(i, 0);
            vector_for(team, 0, hd, [&](int d) { out[d] *= correction; });
            accumulate_rows(team, s, i, v, lo, hi, acc);
            Kokkos::single(Kokkos::PerThread(team), [&] {
              row_sum(i) = (opens ? Scalar(0) : row_sum(i) * correction) + tile_sum;
              row_max(i) = new_max;
            });
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
          const int row = base + q0 + i;
          const Scalar sum = row_sum(i);
          vector_for(team, 0, hd, [&](int d) { O(row, d) = acc(i, d) / sum; });
          Kokkos::single(Kokkos::PerThread(team), [&] { L(row, 0) = row_max(i) + tensor::compat::math::log(sum); });
        });
      });
}

template <class Scalar>
void attention_backward_fused(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& O,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& L,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                              const tensor::Matrix<Scalar>& D, const tensor::Matrix<Scalar>& dQ,
                              const tensor::Matrix<Scalar>& dK, const tensor::Matrix<Scalar>& dV) {
  detail::check_attention_shape(shape);
  detail::require_stack("attention queries", Q, shape);
  detail::require_stack("attention keys", K, shape);
  detail::require_stack("attention values", V, shape);
  detail::require_stack("attention output", O, shape);
  detail::require_stack("attention output gradient", dO, shape);
  detail::require_stack("attention query gradient", dQ, shape);
  detail::require_stack("attention key gradient", dK, shape);
  detail::require_stack("attention value gradient", dV, shape);
  tensor::require_shape("attention log-sum-exp", L, detail::stack_rows(shape), 1);
  tensor::require_shape("attention backward scratch D", D, detail::stack_rows(shape), 1);
  if (shape.batch_heads == 0) return;
  const int T = shape.tokens;
  const int hd = shape.head_dim;
  const int tiles = (T + tile - 1) / tile;
  const Scalar scale = detail::softmax_scale<Scalar>(shape);
  const Scalar one = 1;
  const DocumentMask documents = shape.documents;

  // D = rowsum(dO ∘ O): the softmax backward's Σ_j p_j dp_j, since O = P V.
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_backward_fused_rowsum"),
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, static_cast<int>(detail::stack_rows(shape))),
      KOKKOS_LAMBDA(int r) {
        Scalar sum = 0;
        for (int d = 0; d < hd; ++d) sum += dO(r, d) * O(r, d);
        D(r, 0) = sum;
      });

  // dQ_i = scale Σ_j ds_ij k_j over keys first_i <= j <= i, ds_ij = p_ij (dO_i·v_j − D_i).
  ScratchSize<Scalar> query_size;
  query_size.tiles(4, tile, hd);    // q (scaled), dO, k, acc
  query_size.tiles(2, hd, tile);    // kT, vT
  query_size.tiles(2, tile, tile);  // s then ds, dp
  query_size.columns(2, tile);      // L, D
  const Launch query_launch = launch(space, shape.batch_heads * tiles, query_size.bytes);
  const int query_level = query_launch.level;
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_backward_fused_dq"), query_launch.policy,
      KOKKOS_LAMBDA(const Member& team) {
        const int level = query_level;
        const int base = team.league_rank() / tiles * T;
        const int q0 = team.league_rank() % tiles * tile;
        const int queries = tensor::compat::min(tile, T - q0);
        const Tile<Scalar> q(team.team_scratch(level), tile, hd);
        const Tile<Scalar> dq_out(team.team_scratch(level), tile, hd);
        const Tile<Scalar> k(team.team_scratch(level), tile, hd);
        const Tile<Scalar> acc(team.team_scratch(level), tile, hd);
        const Tile<Scalar> kT(team.team_scratch(level), hd, tile);
        const Tile<Scalar> vT(team.team_scratch(level), hd, tile);
        const Tile<Scalar> s(team.team_scratch(level), tile, tile);
        const Tile<Scalar> dp(team.team_scratch(level), tile, tile);
        const Column<Scalar> lse(team.team_scratch(level), tile);
        const Column<Scalar> delta(team.team_scratch(level), tile);

        stage<false>(team, Q, base + q0, queries, scale, q);
        stage<false>(team, dO, base + q0, queries, one, dq_out);
        zero_rows(team, queries, acc);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
          lse(i) = L(base + q0 + i, 0);
          delta(i) = D(base + q0 + i, 0);
        });
        const int end = q0 + queries;
        for (int k0 = first_tile(documents.first_key(base + q0, T)); k0 < end; k0 += tile) {
          const int keys = tensor::compat::min(tile, end - k0);
          team.team_barrier();
          stage<true>(team, K, base + k0, keys, one, kT);
          stage<true>(team, V, base + k0, keys, one, vT);
          stage<false>(team, K, base + k0, keys, one, k);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
            const int lo = tensor::compat::max(0, documents.first_key(base + q0 + i, T) - k0);
            const int hi = tensor::compat::min(keys, q0 + i - k0 + 1);
            if (lo >= hi) return;
            row_products(team, q, i, kT, lo, hi, s);
            row_products(team, dq_out, i, vT, lo, hi, dp);
            Scalar* const ds = &s(i, 0);
            const Scalar* const dpi = &dp(i, 0);
            const Scalar lse_i = lse(i);
            const Scalar delta_i = delta(i);
            vector_for(team, lo, hi, [&](int j) { ds[j] = detail::softmax_exp(ds[j] - lse_i) * (dpi[j] - delta_i); });
            accumulate_rows(team, s, i, k, lo, hi, acc);
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
          vector_for(team, 0, hd, [&](int d) { dQ(base + q0 + i, d) = scale * acc(i, d); });
        });
      });

  // dV_j = Σ_i p_ij dO_i and dK_j = Σ_i ds_ij (scale q_i) over queries i >= j
  // whose document starts at or before j: a prefix of each query tile, as
  // documents' starts never decrease.
  ScratchSize<Scalar> key_size;
  key_size.tiles(6, tile, hd);    // k, v, q (scaled), dO, dK and dV accumulators
  key_size.tiles(2, hd, tile);    // qT (scaled), dOT
  key_size.tiles(2, tile, tile);  // s then p, dp then ds
  key_size.columns(2, tile);      // L, D
  const Launch key_launch = launch(space, shape.batch_heads * tiles, key_size.bytes);
  const int key_level = key_launch.level;
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_backward_fused_dkdv"), key_launch.policy,
      KOKKOS_LAMBDA(const Member& team) {
        const int level = key_level;
        const int base = team.league_rank() / tiles * T;
        const int k0 = team.league_rank() % tiles * tile;
        const int keys = tensor::compat::min(tile, T - k0);
        const Tile<Scalar> k(team.team_scratch(level), tile, hd);
        const Tile<Scalar> v(team.team_scratch(level), tile, hd);
        const Tile<Scalar> q(team.team_scratch(level), tile, hd);
        const Tile<Scalar> g(team.team_scratch(level), tile, hd);  // dO rows
        const Tile<Scalar> dk(team.team_scratch(level), tile, hd);
        const Tile<Scalar> dv(team.team_scratch(level), tile, hd);
        const Tile<Scalar> qT(team.team_scratch(level), hd, tile);
        const Tile<Scalar> gT(team.team_scratch(level), hd, tile);
        const Tile<Scalar> p(team.team_scratch(level), tile, tile);
        const Tile<Scalar> ds(team.team_scratch(level), tile, tile);
        const Column<Scalar> lse(team.team_scratch(level), tile);
        const Column<Scalar> delta(team.team_scratch(level), tile);

        stage<false>(team, K, base + k0, keys, one, k);
        stage<false>(team, V, base + k0, keys, one, v);
        zero_rows(team, keys, dk);
        zero_rows(team, keys, dv);
        // Causal: query tiles from the diagonal on (k0 is a tile boundary), up
        // to the last holding a query of the key tile's last document.
        for (int q0 = k0; q0 < T && documents.first_key(base + q0, T) < k0 + keys; q0 += tile) {
          const int queries = tensor::compat::min(tile, T - q0);
          team.team_barrier();
          stage<true>(team, Q, base + q0, queries, scale, qT);
          stage<false>(team, Q, base + q0, queries, scale, q);
          stage<true>(team, dO, base + q0, queries, one, gT);
          stage<false>(team, dO, base + q0, queries, one, g);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, queries), [&](int i) {
            lse(i) = L(base + q0 + i, 0);
            delta(i) = D(base + q0 + i, 0);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, keys), [&](int j) {
            // Queries k0 + j .. of this tile.
            const int first = tensor::compat::max(0, k0 + j - q0);
            int last = queries;
            while (last > first && documents.first_key(base + q0 + last - 1, T) > k0 + j) --last;
            if (first >= last) return;
            row_products(team, k, j, qT, first, last, p);
            row_products(team, v, j, gT, first, last, ds);
            Scalar* const pj = &p(j, 0);
            Scalar* const dsj = &ds(j, 0);
            const Scalar* const lse_row = &lse(0);
            const Scalar* const delta_row = &delta(0);
            vector_for(team, first, last, [&](int i) {
              const Scalar probability = detail::softmax_exp(pj[i] - lse_row[i]);
              pj[i] = probability;
              dsj[i] = probability * (dsj[i] - delta_row[i]);
            });
            accumulate_rows(team, p, j, g, first, last, dv);
            accumulate_rows(team, ds, j, q, first, last, dk);
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, keys), [&](int j) {
          vector_for(team, 0, hd, [&](int d) {
            dK(base + k0 + j, d) = dk(j, d);
            dV(base + k0 + j, d) = dv(j, d);
          });
        });
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                 \
  template void attention_forward_fused<Scalar>(                                                                  \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Scalar>&,                   \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
      const tensor::Matrix<Scalar>&);                                                                             \
  template void attention_backward_fused<Scalar>(                                                                 \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Scalar>&,                   \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
      const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
