// Token and position embeddings. Forward is a gather. Backward is a scatter
// whose deterministic form gives every output element one owner: the token
// gradient has a team per block of `block_rows` vocabulary rows that scans all
// rows·T ids in ascending (s, t) order and sums the hits of its rows in
// scratch. That costs O(vocab / block_rows · rows · T) id comparisons per call
// plus O(rows · T · dim) additions: for a 50k vocabulary and 4k positions,
// 6·10^6 comparisons (a team per row made it 2·10^8; kernels_benchmark's
// BM_embedding_backward times it). No atomics and no buffers beyond team
// scratch; a stable sort of positions by id would remove the scan but needs
// both.
#include "kpipe/kernels/embedding.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {

using Policy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using Member = Policy::member_type;
using Scratch = tensor::ExecutionSpace::scratch_memory_space;
template <class Scalar>
using Rows = Kokkos::View<Scalar**, Kokkos::LayoutRight, Scratch, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using Flags = Kokkos::View<int*, Scratch, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Position t's place in its document in sequence s: the positions since the
// last separator before t (all of them where none is, or separator < 0).
template <class Ids>
KOKKOS_INLINE_FUNCTION int document_position(const Ids& ids, int s, int t, int separator) {
  if (separator < 0) return t;
  int u = t;
  while (u > 0 && static_cast<int>(ids(s, u - 1)) != separator) --u;
  return t - u;
}

// Vocabulary rows per team of the token gradient.
constexpr int block_rows = 32;

// The shapes every embedding call shares: rows x T ids, output rows x (T·dim),
// a token table of dim columns and a position table of at least T rows, or
// an empty one (none).
template <class Ids, class Out, class Token, class Position>
void check_shapes(const Ids& ids, const Out& Y, const Token& token, const Position& position) {
  const std::size_t tokens = ids.extent(1);
  const std::size_t dim = token.extent(1);
  if (Y.extent(0) != ids.extent(0) || Y.extent(1) != tokens * dim ||
      (position.size() != 0 && (position.extent(1) != dim || position.extent(0) < tokens))) {
    throw input_error(fmt::format(
        "embedding shapes do not fit: ids {}, token table {}, position table {} (at least T rows), output {}",
        tensor::shape_string(ids), tensor::shape_string(token), tensor::shape_string(position),
        tensor::shape_string(Y)));
  }
}

}  // namespace

template <class Scalar>
void embedding_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                       const tensor::ConstMatrix<tensor::identity_t<Scalar>>& token,
                       const tensor::ConstMatrix<tensor::identity_t<Scalar>>& position, const tensor::Matrix<Scalar>& Y,
                       int first, int separator) {
  check_shapes(ids, Y, token, position);
  const int tokens = static_cast<int>(ids.extent(1));
  const int dim = static_cast<int>(token.extent(1));
  const int vocab = static_cast<int>(token.extent(0));
  const bool positioned = position.size() != 0;
  // One team per position (s, t): a contiguous copy of dim values.
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::embedding_forward"),
      Policy(space, static_cast<int>(ids.extent(0)) * tokens, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& team) {
        const int s = team.league_rank() / tokens;
        const int t = team.league_rank() % tokens;
        const int row = static_cast<int>(ids(s, t)) - first;
        const bool mine = row >= 0 && row < vocab;  // a vocabulary shard holds some ids only
        const int p = positioned ? document_position(ids, s, t, separator) : 0;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) {
          const Scalar looked_up = mine ? token(row, j) : Scalar(0);
          Y(s, t * dim + j) = positioned ? looked_up + position(p, j) : looked_up;
        });
      });
}

template <class Scalar>
void embedding_forward_at(const tensor::ExecutionSpace& space,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                          const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& token,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& position,
                          const tensor::Matrix<Scalar>& Y, int first) {
  const std::size_t n = ids.extent(0);
  const int dim = static_cast<int>(token.extent(1));
  const int vocab = static_cast<int>(token.extent(0));
  const bool positioned = position.size() != 0;
  if (ids.extent(1) != 1 || positions.extent(0) != n || Y.extent(0) != n || Y.extent(1) != token.extent(1) ||
      (positioned && position.extent(1) != token.extent(1))) {
    throw input_error(fmt::format(
        "embedding of single tokens: ids {} (n x 1), {} positions, token table {}, position table {}, output {} "
        "(n x dim) do not fit",
        tensor::shape_string(ids), positions.extent(0), tensor::shape_string(token), tensor::shape_string(position),
        tensor::shape_string(Y)));
  }
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::embedding_forward_at"),
      Policy(space, static_cast<int>(n), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const int row = static_cast<int>(ids(i, 0)) - first;
        const bool mine = row >= 0 && row < vocab;  // a vocabulary shard holds some ids only
        const int t = positions(i);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) {
          const Scalar looked_up = mine ? token(row, j) : Scalar(0);
          Y(i, j) = positioned ? looked_up + position(t, j) : looked_up;
        });
      });
}

template <class Scalar>
void embedding_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dtoken,
                        const tensor::Matrix<Scalar>& dposition, int first, int separator) {
  check_shapes(ids, dY, dtoken, dposition);
  const int rows = static_cast<int>(ids.extent(0));
  const int tokens = static_cast<int>(ids.extent(1));
  const int dim = static_cast<int>(dtoken.extent(1));
  const int vocab = static_cast<int>(dtoken.extent(0));

  // dtoken: a team per block of vocabulary rows; rows no id names are not written.
  const int blocks = (vocab + block_rows - 1) / block_rows;
  const std::size_t scratch = Rows<Scalar>::shmem_size(block_rows, dim) + Flags::shmem_size(block_rows) + 256;
  const int level = scratch <= static_cast<std::size_t>(Policy::scratch_size_max(0)) ? 0 : 1;
  Policy token_policy(space, blocks, Kokkos::AUTO);
  token_policy.set_scratch_size(level, Kokkos::PerTeam(scratch));
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::embedding_backward_token"), token_policy,
      KOKKOS_LAMBDA(const Member& team) {
        const int v0 = team.league_rank() * block_rows;  // local rows of the table (shard)
        const int block = tensor::compat::min(block_rows, vocab - v0);
        const Rows<Scalar> sum(team.team_scratch(level), block_rows, dim);
        const Flags hit(team.team_scratch(level), block_rows);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block), [&](int r) {
          hit(r) = 0;
          for (int j = 0; j < dim; ++j) sum(r, j) = Scalar(0);
        });
        team.team_barrier();
        for (int s = 0; s < rows; ++s) {
          for (int t = 0; t < tokens; ++t) {
            const int r = static_cast<int>(ids(s, t)) - first - v0;
            if (r < 0 || r >= block) continue;
            // Every thread sees the same id, so all reach the barrier.
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dim), [&](int j) { sum(r, j) += dY(s, t * dim + j); });
            Kokkos::single(Kokkos::PerTeam(team), [&] { hit(r) = 1; });
            team.team_barrier();
          }
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block), [&](int r) {
          if (hit(r) == 0) return;
          for (int j = 0; j < dim; ++j) dtoken(v0 + r, j) += sum(r, j);
        });
      });

  // dposition: one thread per element (t, j), summing the rows in ascending order.
  if (dposition.size() == 0) return;
  if (separator < 0) {
    Kokkos::parallel_for(
        tensor::compat::kernel_label("kpipe::kernels::embedding_backward_position"),
        Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, tokens * dim), KOKKOS_LAMBDA(int e) {
          const int t = e / dim;
          const int j = e % dim;
          Scalar sum = 0;
          for (int s = 0; s < rows; ++s) sum += dY(s, e);
          dposition(t, j) += sum;
        });
    return;
  }
  // Packed documents: one thread per column j walks every (s, t) in order,
  // counting the place in the document as it goes, and owns dposition's column.
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::embedding_backward_document_position"),
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, dim), KOKKOS_LAMBDA(int j) {
        for (int s = 0; s < rows; ++s) {
          int p = 0;
          for (int t = 0; t < tokens; ++t) {
            dposition(p, j) += dY(s, t * dim + j);
            p = static_cast<int>(ids(s, t)) == separator ? 0 : p + 1;
          }
        }
      });
}

template <class Scalar>
void document_positions(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                        int separator, const Kokkos::View<int*, tensor::MemorySpace>& positions) {
  const int tokens = static_cast<int>(ids.extent(1));
  if (positions.extent(0) != ids.size()) {
    throw input_error(fmt::format("document positions: {} entries for ids {}, not one per id", positions.extent(0),
                                  tensor::shape_string(ids)));
  }
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::document_positions"),
      Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, static_cast<int>(ids.extent(0))), KOKKOS_LAMBDA(int s) {
        int p = 0;
        for (int t = 0; t < tokens; ++t) {
          positions(s * tokens + t) = p;
          p = static_cast<int>(ids(s, t)) == separator ? 0 : p + 1;
        }
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                    \
  template void embedding_forward<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,         \
                                          const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,    \
                                          const tensor::Matrix<Scalar>&, int, int);                                  \
  template void embedding_forward_at<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,      \
                                             const Kokkos::View<const int*, tensor::MemorySpace>&,                   \
                                             const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, \
                                             const tensor::Matrix<Scalar>&, int);                                    \
  template void embedding_backward<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,        \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,        \
                                           const tensor::Matrix<Scalar>&, int, int);                                 \
  template void document_positions<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, int,   \
                                           const Kokkos::View<int*, tensor::MemorySpace>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
