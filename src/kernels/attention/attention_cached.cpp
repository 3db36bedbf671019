// Cached attention for serving: a kernel that writes the microbatch's K and V
// into their pool rows, then one team per (token, head) that streams the
// token's positions 0..p through an online softmax, `tile` positions at a
// time, reading each position's pool row through its sequence's block table.
// The tiles start at position 0 whatever the microbatch holds, and every sum
// runs in ascending order, so nothing a token computes depends on its
// neighbours in the microbatch.
#include "kpipe/kernels/attention_cached.hpp"

#include <fmt/format.h>

#include "../stored.hpp"
#include "attention_common.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {

// Positions per online-softmax step.
constexpr int tile = 64;

using detail::host_memory;
using detail::RowMember;
using Scratch = tensor::ExecutionSpace::scratch_memory_space;
template <class T>
using Line = Kokkos::View<T*, Scratch, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class Scalar, class Stored>
void check_operands(int heads, const PagedTokens& tokens, const tensor::ConstMatrix<Scalar>& QKV,
                    const tensor::Matrix<Stored>& K, const tensor::Matrix<Stored>& V, const tensor::Matrix<Scalar>& O) {
  const std::size_t n = tokens.slot.extent(0);
  const std::size_t dim = QKV.extent(1) / 3, pool = K.extent(1);
  if (heads < 1 || dim % static_cast<std::size_t>(heads) != 0 || pool == 0 || dim % pool != 0 ||
      pool % (dim / static_cast<std::size_t>(heads)) != 0 || tokens.block_tokens < 1 ||
      tokens.position.extent(0) != n || tokens.sequence.extent(0) != n) {
    throw input_error(fmt::format(
        "cached attention: {} heads of {} features over pools of {} features, {} tokens with {} "
        "positions and {} sequence indices, blocks of {} tokens do not fit",
        heads, 3 * dim, pool, n, tokens.position.extent(0), tokens.sequence.extent(0), tokens.block_tokens));
  }
  tensor::require_shape("cached attention values", V, K.extent(0), pool);
  tensor::require_shape("cached attention QKV projection", QKV, n, 3 * dim);
  tensor::require_shape("cached attention output", O, n, dim);
}

// acc(d) = correction · acc(d) + Σ_j p(j) V(rows(j), column + d), j ascending
// for every d. The host walks rows of V (contiguous, vectorised over d); GPU
// threads own features.
template <class Scalar, class Pool>
KOKKOS_INLINE_FUNCTION void accumulate(const RowMember& team, int keys, Scalar correction, const Line<Scalar>& p,
                                       const Line<int>& rows, const Pool& V, int column, const Line<Scalar>& acc) {
  const int hd = static_cast<int>(acc.extent(0));
  if constexpr (host_memory) {
    (void)team;
    Scalar* const out = acc.data();
    for (int d = 0; d < hd; ++d) out[d] *= correction;
    for (int j = 0; j < keys; ++j) {
      const Scalar pj = p(j);
      const auto* const v = &V(rows(j), column);
      for (int d = 0; d < hd; ++d) out[d] += pj * detail::load(v[d]);
    }
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, hd), [&](int d) {
      Scalar a = acc(d) * correction;
      for (int j = 0; j < keys; ++j) a += p(j) * detail::load(V(rows(j), column + d));
      acc(d) = a;
    });
  }
}

// Grouped-query attention: the projection repeats each cached key and value
// head for the `group` query heads that share it; the pools keep it once.
template <class Scalar, class Stored>
void write_cache(const tensor::ExecutionSpace& space, const PagedTokens& tokens, const tensor::ConstMatrix<Scalar>& QKV,
                 int head_dim, int group, const tensor::Matrix<Stored>& K, const tensor::Matrix<Stored>& V) {
  const auto slot = tokens.slot;
  const int dim = static_cast<int>(QKV.extent(1)) / 3, pool = static_cast<int>(K.extent(1));
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_cached_write"),
      Kokkos::TeamPolicy<tensor::ExecutionSpace>(space, tokens.tokens(), Kokkos::AUTO),
      KOKKOS_LAMBDA(const RowMember& team) {
        const int i = team.league_rank();
        const int row = slot(i);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, pool), [&](int d) {
          const int column = d / head_dim * group * head_dim + d % head_dim;  // the group's first repeat
          detail::store(QKV(i, dim + column), K(row, d));
          detail::store(QKV(i, 2 * dim + column), V(row, d));
        });
      });
}

}  // namespace

template <class Scalar, class Stored>
void attention_cached(const tensor::ExecutionSpace& space, int heads, const PagedTokens& tokens,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV, const tensor::Matrix<Stored>& K,
                      const tensor::Matrix<Stored>& V, const tensor::Matrix<Scalar>& O) {
  check_operands<Scalar, Stored>(heads, tokens, QKV, K, V, O);
  if (tokens.tokens() == 0) return;
  const int hd = static_cast<int>(QKV.extent(1)) / 3 / heads;
  const int group = static_cast<int>(QKV.extent(1)) / 3 / static_cast<int>(K.extent(1));
  write_cache<Scalar, Stored>(space, tokens, QKV, hd, group, K, V);

  // Local copies for the lambda below.
  const auto position = tokens.position;
  const auto sequence = tokens.sequence;
  const auto blocks = tokens.blocks;
  const int block_tokens = tokens.block_tokens;
  const Scalar scale = detail::softmax_scale<Scalar>(AttentionShape{heads, 1, hd});

  // q (scaled) and acc of hd, the tile's probabilities and pool rows; each
  // view may be padded up to the scratch alignment.
  const std::size_t scratch =
      2 * Line<Scalar>::shmem_size(hd) + Line<Scalar>::shmem_size(tile) + Line<int>::shmem_size(tile) + 4 * 128;
  auto policy = detail::row_policy(space, tokens.tokens() * heads);
  const int level = scratch <= static_cast<std::size_t>(detail::RowPolicy::scratch_size_max(0)) ? 0 : 1;
  policy.set_scratch_size(level, Kokkos::PerTeam(scratch));

  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::attention_cached"), policy, KOKKOS_LAMBDA(const RowMember& team) {
        const int i = team.league_rank() / heads;
        const int head = team.league_rank() % heads;
        const int column = head * hd;          // of the query and the output
        const int cached = head / group * hd;  // of its key and value head in the pools
        const int last = position(i);
        const int seq = sequence(i);
        const Line<Scalar> q(team.team_scratch(level), hd);
        const Line<Scalar> acc(team.team_scratch(level), hd);
        const Line<Scalar> p(team.team_scratch(level), tile);
        const Line<int> rows(team.team_scratch(level), tile);
        detail::row_for(team, hd, [&](int d) {
          q(d) = scale * QKV(i, column + d);
          acc(d) = Scalar(0);
        });
        Scalar running_max = 0;
        Scalar running_sum = 0;
        for (int k0 = 0; k0 <= last; k0 += tile) {
          const int keys = tensor::compat::min(tile, last + 1 - k0);
          team.team_barrier();
          detail::row_for(team, keys, [&](int j) {
            const int t = k0 + j;
            const int row = blocks(seq, t / block_tokens) * block_tokens + t % block_tokens;
            rows(j) = row;
            Scalar s = 0;
            for (int d = 0; d < hd; ++d) s += q(d) * detail::load(K(row, cached + d));
            p(j) = s;
          });
          team.team_barrier();
          const Scalar tile_max = detail::row_max(team, keys, [&](int j) { return p(j); });
          const Scalar new_max = k0 == 0 ? tile_max : tensor::compat::max(running_max, tile_max);
          // Rescales what earlier tiles summed against the old maximum.
          const Scalar correction = k0 == 0 ? Scalar(0) : detail::softmax_exp(running_max - new_max);
          detail::row_for(team, keys, [&](int j) { p(j) = detail::softmax_exp(p(j) - new_max); });
          team.team_barrier();
          const Scalar tile_sum = detail::row_sum(team, keys, [&](int j) { return p(j); });
          accumulate(team, keys, correction, p, rows, V, cached, acc);
          running_sum = running_sum * correction + tile_sum;
          running_max = new_max;
        }
        team.team_barrier();
        detail::row_for(team, hd, [&](int d) { O(i, column + d) = acc(d) / running_sum; });
      });
}

#define KPIPE_INSTANTIATE(Scalar, Stored)                                                                           \
  template void attention_cached<Scalar, Stored>(const tensor::ExecutionSpace&, int, const PagedTokens&,            \
                                                 const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Stored>&, \
                                                 const tensor::Matrix<Stored>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float, float)
KPIPE_INSTANTIATE(double, double)
KPIPE_INSTANTIATE(float, tensor::BFloat16)
KPIPE_INSTANTIATE(float, tensor::Half)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
