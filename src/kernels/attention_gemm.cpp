// The gemm attention path: the four products of attention are batched GEMMs
// through the GEMM dispatch (OpenBLAS or cuBLAS when compute.gemm = vendor),
// and the only other work is one causal softmax kernel forward and one softmax
// backward kernel. The products run over the full T x T scores, masked
// entries included: a dense BLAS call beats skipping half of them by hand.
// They read Q, K, V and write O (and their gradients) straight in the
// projections, one batched call per head over the sequences: copying the heads
// into stacks and back cost more than the softmax.
#include <fmt/format.h>

#include "attention_common.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {

// The parts of a fused QKV projection, each heads·hd columns wide.
enum class Part { q, k, v };

// Where each head's blocks lie in the position-major matrices of one call.
struct HeadBlocks {
  int sequences;
  int heads;
  int tokens;
  int head_dim;

  // Head h's T x hd block of every sequence in O or dO.
  template <class Scalar>
  Batch<Scalar> of(const tensor::Matrix<Scalar>& O, int h) const {
    return row_blocks(O, sequences, h * head_dim, head_dim);
  }
  // The same in one part of QKV or dQKV.
  template <class Scalar>
  Batch<Scalar> of(const tensor::Matrix<Scalar>& QKV, Part part, int h) const {
    return of(QKV, static_cast<int>(part) * heads + h);
  }
  // Head h's T x T block of every sequence in P or dP: blocks s·heads + h of
  // the stacks, each contiguous (blocks with rows heads·T apart, cut out of a
  // position-major P, made OpenBLAS's small-matrix kernels slower).
  template <class Scalar>
  Batch<Scalar> scores(const tensor::Matrix<Scalar>& P, int h) const {
    const std::size_t ld = P.stride(0);
    const std::size_t block = static_cast<std::size_t>(tokens) * ld;
    return Batch<Scalar>(P.data() + h * block, Kokkos::LayoutStride(sequences, heads * block, tokens, ld, tokens, 1));
  }
};

// The layout of QKV, O (or their gradients) and P for `shape`, checked:
// heads = O's columns / hd, and batch_heads = sequences · heads.
template <class QkvView, class OView, class PView>
HeadBlocks head_blocks(const AttentionShape& shape, const QkvView& QKV, const OView& O, const PView& P) {
  detail::check_attention_shape(shape);
  const auto hd = static_cast<std::size_t>(shape.head_dim);
  const std::size_t rows = O.extent(0);
  const std::size_t heads = O.extent(1) / hd;
  const std::size_t sequences = rows / static_cast<std::size_t>(shape.tokens);
  if (O.extent(1) % hd != 0 || rows % static_cast<std::size_t>(shape.tokens) != 0 ||
      sequences * heads != static_cast<std::size_t>(shape.batch_heads)) {
    throw input_error(fmt::format("attention output {} is not {} sequence-heads of {} tokens and head size {}",
                                  tensor::shape_string(O), shape.batch_heads, shape.tokens, shape.head_dim));
  }
  tensor::require_shape("attention QKV projection", QKV, rows, 3 * heads * hd);
  tensor::require_shape("attention probabilities", P, detail::stack_rows(shape),
                        static_cast<std::size_t>(shape.tokens));
  return {static_cast<int>(sequences), static_cast<int>(heads), shape.tokens, shape.head_dim};
}

// Row r of P holds scores of position t = r mod T; it becomes the softmax of
// its entries 0..t, and the masked entries above the diagonal exact zeros.
// The loops run over the valid entries rounded up to whole vectors of lanes
// and mask by selection: the same results as loops over the valid entries (a
// masked entry adds an exact zero to the sum), without the scalar remainders
// that rows of 1..T valid entries would leave.
template <class Scalar>
void causal_softmax(const tensor::ExecutionSpace& space, int tokens, const tensor::Matrix<Scalar>& P) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_causal_softmax", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int valid = r % tokens + 1;
        const int used = detail::whole_lanes(valid, tokens);
        Scalar* const p = &P(r, 0);
        const Scalar max = detail::row_max(row, used, [&](int j) { return j < valid ? p[j] : p[0]; });
        // Each exponential is stored as it is summed: one pass less over the row.
        const Scalar sum = detail::row_sum(row, used, [&](int j) {
          const Scalar e = j < valid ? detail::softmax_exp(p[j] - max) : Scalar(0);
          p[j] = e;
          return e;
        });
        row.team_barrier();
        // One division per row: a vector division per entry cost as much as the exponentials.
        const Scalar inverse = Scalar(1) / sum;
        detail::row_for(row, tokens, [&](int j) { p[j] = j < used ? p[j] * inverse : Scalar(0); });
      });
}

// dP becomes dS = scale · P ∘ (dP − rowsum(dP ∘ P)): the gradient of the
// softmax, with the 1/sqrt(hd) of the scores folded in, zero where masked.
template <class Scalar>
void causal_softmax_backward(const tensor::ExecutionSpace& space, int tokens, Scalar scale,
                             const tensor::ConstMatrix<Scalar>& P, const tensor::Matrix<Scalar>& dP) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_softmax_backward", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int valid = r % tokens + 1;
        const Scalar* const p = &P(r, 0);
        Scalar* const dp = &dP(r, 0);
        const int used = detail::whole_lanes(valid, tokens);
        const Scalar dot = detail::row_sum(row, used, [&](int j) { return j < valid ? dp[j] * p[j] : Scalar(0); });
        detail::row_for(row, tokens, [&](int j) { dp[j] = j < valid ? scale * p[j] * (dp[j] - dot) : Scalar(0); });
      });
}

}  // namespace

template <class Scalar>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV, const tensor::Matrix<Scalar>& P,
                            const tensor::Matrix<Scalar>& O, GemmPath gemm) {
  const HeadBlocks at = head_blocks(shape, QKV, O, P);
  if (shape.batch_heads == 0) return;
  const Scalar scale = detail::softmax_scale<Scalar>(shape);
  for (int h = 0; h < at.heads; ++h) {
    gemm_batched<Scalar>(space, Trans::no, Trans::yes, scale, at.of(QKV, Part::q, h), at.of(QKV, Part::k, h), Scalar(0),
                         at.scores(P, h), gemm);
  }
  causal_softmax<Scalar>(space, shape.tokens, P);
  for (int h = 0; h < at.heads; ++h) {
    gemm_batched<Scalar>(space, Trans::no, Trans::no, Scalar(1), at.scores(P, h), at.of(QKV, Part::v, h), Scalar(0),
                         at.of(O, h), gemm);
  }
}

template <class Scalar>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& P,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                             const tensor::Matrix<Scalar>& dP, const tensor::Matrix<Scalar>& dQKV, GemmPath gemm) {
  const HeadBlocks at = head_blocks(shape, QKV, dO, P);
  tensor::require_shape("attention probability gradient", dP, P.extent(0), P.extent(1));
  tensor::require_shape("attention QKV gradient", dQKV, QKV.extent(0), QKV.extent(1));
  if (shape.batch_heads == 0) return;
  const Scalar one = 1;
  const Scalar zero = 0;
  for (int h = 0; h < at.heads; ++h) {
    const auto dO_h = at.of(dO, h);
    gemm_batched<Scalar>(space, Trans::yes, Trans::no, one, at.scores(P, h), dO_h, zero, at.of(dQKV, Part::v, h), gemm);
    gemm_batched<Scalar>(space, Trans::no, Trans::yes, one, dO_h, at.of(QKV, Part::v, h), zero, at.scores(dP, h), gemm);
  }
  causal_softmax_backward<Scalar>(space, shape.tokens, detail::softmax_scale<Scalar>(shape), P, dP);
  for (int h = 0; h < at.heads; ++h) {
    const auto dS_h = at.scores(dP, h);
    gemm_batched<Scalar>(space, Trans::no, Trans::no, one, dS_h, at.of(QKV, Part::k, h), zero, at.of(dQKV, Part::q, h),
                         gemm);
    gemm_batched<Scalar>(space, Trans::yes, Trans::no, one, dS_h, at.of(QKV, Part::q, h), zero, at.of(dQKV, Part::k, h),
                         gemm);
  }
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                 \
  template void attention_forward_gemm<Scalar>(const tensor::ExecutionSpace&, const AttentionShape&,              \
                                               const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&, \
                                               const tensor::Matrix<Scalar>&, GemmPath);                          \
  template void attention_backward_gemm<Scalar>(                                                                  \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Scalar>&,                   \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
      const tensor::Matrix<Scalar>&, GemmPath);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
