// The portable GEMM: one Kokkos team per tile_m x tile_n block of C (of one
// block of the batch: the league is batch x tiles, and a batch of one is a
// plain GEMM). The team
// walks K in slices of tile_k, copies op(A) and op(B) of each slice into team
// scratch (zero-padded at the edges, transposition resolved while copying),
// and each thread updates its micro_m x micro_n outputs from scratch with
// compile-time loop bounds the compiler can unroll and vectorise. Every output
// sums its K products in ascending order, so the result does not depend on the
// team size or on how teams are scheduled.
#include "gemm_backends.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels::detail {

namespace {

struct Tiling {
  static constexpr int tile_m = 32;
  static constexpr int tile_n = 64;
  static constexpr int tile_k = 32;
  static constexpr int micro_m = 4;
  static constexpr int micro_n = 16;
  static constexpr int micro_tiles = (tile_m / micro_m) * (tile_n / micro_n);
};

// Host threads each take a whole tile; a GPU team has one thread per micro tile.
constexpr int team_size() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible ? 1 : Tiling::micro_tiles;
}

using Policy = Kokkos::TeamPolicy<tensor::ExecutionSpace>;
using Member = Policy::member_type;

// An operand's element as the tiles hold it: bfloat16 and float16 widen to float32 (exact).
template <class T>
KOKKOS_INLINE_FUNCTION T widened(T value) {
  return value;
}
KOKKOS_INLINE_FUNCTION float widened(tensor::BFloat16 value) { return tensor::to_float(value); }
KOKKOS_INLINE_FUNCTION float widened(tensor::Half value) { return tensor::to_float(value); }

// Copies the Rows x Cols block at (row0, col0) of matrix `block` of the
// operand into `tile`, as is or transposed, zero-padding whatever lies outside
// the matrix. Each thread copies whole source rows, so the inner loop reads
// contiguous memory.
template <bool Transposed, int Rows, int Cols, class Tile, class Source>
KOKKOS_INLINE_FUNCTION void copy_block(const Member& team, const Source& source, int block, int row0, int col0,
                                       const Tile& tile) {
  const int valid_rows = tensor::compat::min(Rows, static_cast<int>(source.extent(1)) - row0);
  const int valid_cols = tensor::compat::max(0, tensor::compat::min(Cols, static_cast<int>(source.extent(2)) - col0));
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Rows), [&](int r) {
    const int filled = r < valid_rows ? valid_cols : 0;
    for (int c = 0; c < filled; ++c) {
      (Transposed ? tile(c, r) : tile(r, c)) = widened(source(block, row0 + r, col0 + c));
    }
    for (int c = filled; c < Cols; ++c) (Transposed ? tile(c, r) : tile(r, c)) = 0;
  });
}

// c_tile += a_tile^T b_tile on micro tile t, accumulated in registers.
template <class ATile, class BTile, class CTile>
KOKKOS_INLINE_FUNCTION void update_micro_tile(const ATile& a_tile, const BTile& b_tile, const CTile& c_tile, int t) {
  using T = Tiling;
  using Scalar = typename CTile::value_type;
  const int i0 = t / (T::tile_n / T::micro_n) * T::micro_m;
  const int j0 = t % (T::tile_n / T::micro_n) * T::micro_n;
  Scalar acc[T::micro_m][T::micro_n];
  for (int i = 0; i < T::micro_m; ++i) {
    for (int j = 0; j < T::micro_n; ++j) acc[i][j] = c_tile(i0 + i, j0 + j);
  }
  for (int kk = 0; kk < T::tile_k; ++kk) {
    // A row of op(B) in registers first, so compilers vectorise over j.
    Scalar b[T::micro_n];
    for (int j = 0; j < T::micro_n; ++j) b[j] = b_tile(kk, j0 + j);
    for (int i = 0; i < T::micro_m; ++i) {
      const Scalar a = a_tile(kk, i0 + i);
      for (int j = 0; j < T::micro_n; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int i = 0; i < T::micro_m; ++i) {
    for (int j = 0; j < T::micro_n; ++j) c_tile(i0 + i, j0 + j) = acc[i][j];
  }
}

// The kernel for one combination of transpositions.
template <class In, class Scalar, bool TransA, bool TransB>
void tiled_gemm(const tensor::ExecutionSpace& space, Scalar alpha, const ConstBatch<In>& A, const ConstBatch<In>& B,
                Scalar beta, const Batch<Scalar>& C) {
  using T = Tiling;
  using Scratch = typename tensor::ExecutionSpace::scratch_memory_space;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  // a_tile(kk, i) = op(A)(row0 + i, k0 + kk), b_tile(kk, j) = op(B)(k0 + kk, col0 + j).
  using ATile = Kokkos::View<Scalar[T::tile_k][T::tile_m], Kokkos::LayoutRight, Scratch, Unmanaged>;
  using BTile = Kokkos::View<Scalar[T::tile_k][T::tile_n], Kokkos::LayoutRight, Scratch, Unmanaged>;
  using CTile = Kokkos::View<Scalar[T::tile_m][T::tile_n], Kokkos::LayoutRight, Scratch, Unmanaged>;

  const int batch = static_cast<int>(C.extent(0));
  const int m = static_cast<int>(C.extent(1));
  const int n = static_cast<int>(C.extent(2));
  const int k = static_cast<int>(TransA ? A.extent(1) : A.extent(2));
  const int tiles_n = (n + T::tile_n - 1) / T::tile_n;
  const int tiles = (m + T::tile_m - 1) / T::tile_m * tiles_n;

  Policy policy(space, batch * tiles, team_size());
  // Each tile view may be padded up to the scratch alignment.
  const std::size_t scratch = ATile::shmem_size() + BTile::shmem_size() + CTile::shmem_size() + 3 * 128;
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch));

  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::kernels::gemm_portable"), policy, KOKKOS_LAMBDA(const Member& team) {
        const int block = team.league_rank() / tiles;
        const int tile = team.league_rank() % tiles;
        const int row0 = tile / tiles_n * T::tile_m;
        const int col0 = tile % tiles_n * T::tile_n;
        const ATile a_tile(team.team_scratch(0));
        const BTile b_tile(team.team_scratch(0));
        const CTile c_tile(team.team_scratch(0));

        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, T::tile_m), [&](int i) {
          for (int j = 0; j < T::tile_n; ++j) c_tile(i, j) = Scalar(0);
        });
        for (int k0 = 0; k0 < k; k0 += T::tile_k) {
          team.team_barrier();
          if (TransA) {
            copy_block<false, T::tile_k, T::tile_m>(team, A, block, k0, row0, a_tile);
          } else {
            copy_block<true, T::tile_m, T::tile_k>(team, A, block, row0, k0, a_tile);
          }
          if (TransB) {
            copy_block<true, T::tile_n, T::tile_k>(team, B, block, col0, k0, b_tile);
          } else {
            copy_block<false, T::tile_k, T::tile_n>(team, B, block, k0, col0, b_tile);
          }
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, T::micro_tiles),
                               [&](int t) { update_micro_tile(a_tile, b_tile, c_tile, t); });
        }
        team.team_barrier();
        const int rows = tensor::compat::min(T::tile_m, m - row0);
        const int cols = tensor::compat::min(T::tile_n, n - col0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int i) {
          for (int j = 0; j < cols; ++j) {
            const Scalar product = alpha * c_tile(i, j);
            // beta == 0 must not read C, which may hold NaN (BLAS semantics).
            Scalar& entry = C(block, row0 + i, col0 + j);
            entry = beta == Scalar(0) ? product : product + beta * entry;
          }
        });
      });
}

}  // namespace

template <class In, class Scalar>
void portable_gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, Scalar alpha,
                   const ConstBatch<In>& A, const ConstBatch<In>& B, Scalar beta, const Batch<Scalar>& C) {
  const bool a_t = trans_a == Trans::yes;
  const bool b_t = trans_b == Trans::yes;
  if (!a_t && !b_t) tiled_gemm<In, Scalar, false, false>(space, alpha, A, B, beta, C);
  if (!a_t && b_t) tiled_gemm<In, Scalar, false, true>(space, alpha, A, B, beta, C);
  if (a_t && !b_t) tiled_gemm<In, Scalar, true, false>(space, alpha, A, B, beta, C);
  if (a_t && b_t) tiled_gemm<In, Scalar, true, true>(space, alpha, A, B, beta, C);
}

template void portable_gemm<float, float>(const tensor::ExecutionSpace&, Trans, Trans, float, const ConstBatch<float>&,
                                          const ConstBatch<float>&, float, const Batch<float>&);
template void portable_gemm<double, double>(const tensor::ExecutionSpace&, Trans, Trans, double,
                                            const ConstBatch<double>&, const ConstBatch<double>&, double,
                                            const Batch<double>&);
template void portable_gemm<tensor::BFloat16, float>(const tensor::ExecutionSpace&, Trans, Trans, float,
                                                     const ConstBatch<tensor::BFloat16>&,
                                                     const ConstBatch<tensor::BFloat16>&, float, const Batch<float>&);
template void portable_gemm<tensor::Half, float>(const tensor::ExecutionSpace&, Trans, Trans, float,
                                                 const ConstBatch<tensor::Half>&, const ConstBatch<tensor::Half>&,
                                                 float, const Batch<float>&);

}  // namespace kpipe::kernels::detail
