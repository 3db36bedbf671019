// The gemm attention path: the four products of attention are batched GEMMs
// through the GEMM dispatch (OpenBLAS or cuBLAS when compute.gemm = vendor),
// and the only other work is one causal softmax kernel forward and one softmax
// backward kernel. The products run over the full T x T scores, masked
// entries included: a dense BLAS call beats skipping half of them by hand.
// They read Q, K, V and write O (and their gradients) straight in the
// projections, one batched call per head over the sequences: copying the heads
// into stacks and back cost more than the softmax. Under compute.precision =
// bf16 and fp16 the products take operands of that type (In) with float32
// sums (gemm_batched_mixed); the softmax and its gradient compute in float32
// and write their results straight in that type.
#include <fmt/format.h>

#include <type_traits>

#include "../stored.hpp"
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
  Batch<Scalar> of(const Kokkos::View<Scalar**, Kokkos::LayoutRight, tensor::MemorySpace>& O, int h) const {
    return row_blocks(O, sequences, h * head_dim, head_dim);
  }
  // The same in one part of QKV or dQKV.
  template <class Scalar>
  Batch<Scalar> of(const Kokkos::View<Scalar**, Kokkos::LayoutRight, tensor::MemorySpace>& QKV, Part part,
                   int h) const {
    return of(QKV, static_cast<int>(part) * heads + h);
  }
  // Head h's T x T block of every sequence in P or dP: blocks s·heads + h of
  // the stacks, each contiguous (blocks with rows heads·T apart, cut out of a
  // position-major P, made OpenBLAS's small-matrix kernels slower).
  template <class Scalar>
  Batch<Scalar> scores(const Kokkos::View<Scalar**, Kokkos::LayoutRight, tensor::MemorySpace>& P, int h) const {
    const std::size_t ld = P.stride(0);
    const std::size_t block = static_cast<std::size_t>(tokens) * ld;
    return Batch<Scalar>(P.data() + h * block, Kokkos::LayoutStride(sequences, heads * block, tokens, ld, tokens, 1));
  }
};

// The layout of QKV (or its gradient) and P for `shape`, checked: heads =
// QKV's columns / 3·hd, and batch_heads = sequences · heads.
template <class QkvView, class PView>
HeadBlocks head_blocks(const AttentionShape& shape, const QkvView& QKV, const PView& P) {
  detail::check_attention_shape(shape);
  const auto hd = static_cast<std::size_t>(shape.head_dim);
  const std::size_t rows = QKV.extent(0);
  const std::size_t heads = QKV.extent(1) / (3 * hd);
  const std::size_t sequences = rows / static_cast<std::size_t>(shape.tokens);
  if (QKV.extent(1) % (3 * hd) != 0 || rows % static_cast<std::size_t>(shape.tokens) != 0 ||
      sequences * heads != static_cast<std::size_t>(shape.batch_heads)) {
    throw input_error(fmt::format("attention QKV projection {} is not {} sequence-heads of {} tokens and head size {}",
                                  tensor::shape_string(QKV), shape.batch_heads, shape.tokens, shape.head_dim));
  }
  tensor::require_shape("attention probabilities", P, detail::stack_rows(shape),
                        static_cast<std::size_t>(shape.tokens));
  return {static_cast<int>(sequences), static_cast<int>(heads), shape.tokens, shape.head_dim};
}

// And O (or dO), the heads side by side, one row per QKV row.
template <class OView>
void require_heads_output(const char* what, const HeadBlocks& at, const OView& O) {
  tensor::require_shape(what, O, static_cast<std::size_t>(at.sequences) * at.tokens,
                        static_cast<std::size_t>(at.heads) * at.head_dim);
}

// Row r of P holds scores of position t = r mod T; row r of P_out (P itself
// for Scalar operands, else the kept bfloat16/float16 probabilities, written
// rounded without a float32 pass between) becomes the softmax of its entries
// first..t (first = 0 but where documents are packed), and the masked entries
// exact zeros. The loops run over the entries up to t rounded up to whole
// vectors of lanes and mask by selection: the same results as loops over the
// valid entries (a masked entry adds an exact zero to the sum), without the
// scalar remainders that rows of 1..T valid entries would leave.
template <class Scalar, class Out>
void causal_softmax(const tensor::ExecutionSpace& space, int tokens, const DocumentMask& documents,
                    const tensor::Matrix<Scalar>& P, const tensor::Matrix<Out>& P_out) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_causal_softmax", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int first = documents.first_key(r, tokens);
        const int valid = r % tokens + 1;
        const int used = detail::whole_lanes(valid, tokens);
        Scalar* const p = &P(r, 0);
        Out* const out = &P_out(r, 0);
        const auto in = [&](int j) { return j >= first && j < valid; };
        const Scalar max = detail::row_max(row, used, [&](int j) { return in(j) ? p[j] : p[first]; });
        // Each exponential is stored as it is summed: one pass less over the row.
        const Scalar sum = detail::row_sum(row, used, [&](int j) {
          const Scalar e = in(j) ? detail::softmax_exp(p[j] - max) : Scalar(0);
          p[j] = e;
          return e;
        });
        row.team_barrier();
        // One division per row: a vector division per entry cost as much as the exponentials.
        const Scalar inverse = Scalar(1) / sum;
        detail::row_for(row, tokens, [&](int j) { detail::store(j < used ? p[j] * inverse : Scalar(0), out[j]); });
      });
}

// dS = scale · P ∘ (dP − rowsum(dP ∘ P)) into dS (dP itself for Scalar
// operands, else the bfloat16/float16 operand of the next products, written
// rounded): the gradient of the softmax, with the 1/sqrt(hd) of the scores
// folded in, zero where masked. P is Scalar, or the kept bfloat16/float16
// probabilities, widened exactly.
template <class Scalar, class In>
void causal_softmax_backward(const tensor::ExecutionSpace& space, int tokens, const DocumentMask& documents,
                             Scalar scale, const tensor::ConstMatrix<In>& P, const tensor::Matrix<Scalar>& dP,
                             const tensor::Matrix<In>& dS) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_softmax_backward", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int first = documents.first_key(r, tokens);
        const int valid = r % tokens + 1;
        const In* const p = &P(r, 0);
        Scalar* const dp = &dP(r, 0);
        In* const ds = &dS(r, 0);
        const int used = detail::whole_lanes(valid, tokens);
        const auto in = [&](int j) { return j >= first && j < valid; };
        const Scalar dot =
            detail::row_sum(row, used, [&](int j) { return in(j) ? dp[j] * detail::load(p[j]) : Scalar(0); });
        detail::row_for(row, tokens, [&](int j) {
          detail::store(in(j) ? scale * detail::load(p[j]) * (dp[j] - dot) : Scalar(0), ds[j]);
        });
      });
}

// One batched product of the gemm path: gemm_batched on Scalar operands,
// gemm_batched_mixed on bfloat16 or float16 ones.
template <class Scalar, class In>
void product(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, Scalar alpha, const ConstBatch<In>& A,
             const ConstBatch<In>& B, const Batch<Scalar>& C, GemmPath gemm) {
  if constexpr (std::is_same_v<In, Scalar>) {
    gemm_batched<Scalar>(space, trans_a, trans_b, alpha, A, B, Scalar(0), C, gemm);
  } else {
    gemm_batched_mixed(space, trans_a, trans_b, alpha, A, B, 0.0f, C, gemm);
  }
}

// The probabilities on In operands: S = scale Q Kᵀ into P, its softmax into
// P_in (P itself for Scalar operands). Forward runs it, and B again under
// selective recomputation: the same kernels, so the same bits.
template <class Scalar, class In>
HeadBlocks probabilities(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                         const tensor::ConstMatrix<In>& QKV, const tensor::Matrix<Scalar>& P,
                         const tensor::Matrix<In>& P_in, GemmPath gemm) {
  const HeadBlocks at = head_blocks(shape, QKV, P);
  tensor::require_shape("attention probabilities kept", P_in, P.extent(0), P.extent(1));
  if (shape.batch_heads == 0) return at;
  const Scalar scale = detail::softmax_scale<Scalar>(shape);
  for (int h = 0; h < at.heads; ++h) {
    product<Scalar, In>(space, Trans::no, Trans::yes, scale, at.of(QKV, Part::q, h), at.of(QKV, Part::k, h),
                        at.scores(P, h), gemm);
  }
  causal_softmax<Scalar, In>(space, shape.tokens, shape.documents, P, P_in);
  return at;
}

// The forward on In operands: the probabilities, then O = P_in V.
template <class Scalar, class In>
void forward_products(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                      const tensor::ConstMatrix<In>& QKV, const tensor::Matrix<Scalar>& P,
                      const tensor::Matrix<In>& P_in, const tensor::Matrix<Scalar>& O, GemmPath gemm) {
  const HeadBlocks at = probabilities<Scalar, In>(space, shape, QKV, P, P_in, gemm);
  require_heads_output("attention output", at, O);
  if (shape.batch_heads == 0) return;
  const tensor::ConstMatrix<In> kept = P_in;
  for (int h = 0; h < at.heads; ++h) {
    product<Scalar, In>(space, Trans::no, Trans::no, Scalar(1), at.scores(kept, h), at.of(QKV, Part::v, h), at.of(O, h),
                        gemm);
  }
}

// The backward on In operands: dV = Pᵀ dO, dP = dO Vᵀ, the softmax's
// gradient into dS_in (dP itself for Scalar operands), dQ = dS K, dK = dSᵀ Q.
template <class Scalar, class In>
void backward_products(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                       const tensor::ConstMatrix<In>& QKV, const tensor::ConstMatrix<In>& P,
                       const tensor::ConstMatrix<In>& dO, const tensor::Matrix<Scalar>& dP,
                       const tensor::Matrix<In>& dS_in, const tensor::Matrix<Scalar>& dQKV, GemmPath gemm) {
  const HeadBlocks at = head_blocks(shape, QKV, P);
  require_heads_output("attention output gradient", at, dO);
  tensor::require_shape("attention probability gradient", dP, P.extent(0), P.extent(1));
  tensor::require_shape("attention score gradient kept", dS_in, P.extent(0), P.extent(1));
  tensor::require_shape("attention QKV gradient", dQKV, QKV.extent(0), QKV.extent(1));
  if (shape.batch_heads == 0) return;
  for (int h = 0; h < at.heads; ++h) {
    const auto dO_h = at.of(dO, h);
    product<Scalar, In>(space, Trans::yes, Trans::no, Scalar(1), at.scores(P, h), dO_h, at.of(dQKV, Part::v, h), gemm);
    product<Scalar, In>(space, Trans::no, Trans::yes, Scalar(1), dO_h, at.of(QKV, Part::v, h), at.scores(dP, h), gemm);
  }
  causal_softmax_backward<Scalar, In>(space, shape.tokens, shape.documents, detail::softmax_scale<Scalar>(shape), P, dP,
                                      dS_in);
  const tensor::ConstMatrix<In> dS = dS_in;
  for (int h = 0; h < at.heads; ++h) {
    const auto dS_h = at.scores(dS, h);
    product<Scalar, In>(space, Trans::no, Trans::no, Scalar(1), dS_h, at.of(QKV, Part::k, h), at.of(dQKV, Part::q, h),
                        gemm);
    product<Scalar, In>(space, Trans::yes, Trans::no, Scalar(1), dS_h, at.of(QKV, Part::q, h), at.of(dQKV, Part::k, h),
                        gemm);
  }
}

}  // namespace

template <class Scalar>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV, const tensor::Matrix<Scalar>& P,
                            const tensor::Matrix<Scalar>& O, GemmPath gemm) {
  forward_products<Scalar, Scalar>(space, shape, QKV, P, P, O, gemm);
}

template <class Scalar>
void attention_probabilities_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV,
                                  const tensor::Matrix<Scalar>& P, GemmPath gemm) {
  probabilities<Scalar, Scalar>(space, shape, QKV, P, P, gemm);
}

template <class Scalar>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& P,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                             const tensor::Matrix<Scalar>& dP, const tensor::Matrix<Scalar>& dQKV, GemmPath gemm) {
  backward_products<Scalar, Scalar>(space, shape, QKV, P, dO, dP, dP, dQKV, gemm);
}

template <class Reduced>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<Reduced>& QKV, const tensor::Matrix<float>& P,
                            const tensor::Matrix<Reduced>& P_kept, const tensor::Matrix<float>& O, GemmPath gemm) {
  forward_products<float, Reduced>(space, shape, QKV, P, P_kept, O, gemm);
}

template <class Reduced>
void attention_probabilities_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                                  const tensor::ConstMatrix<Reduced>& QKV, const tensor::Matrix<float>& P,
                                  const tensor::Matrix<Reduced>& P_kept, GemmPath gemm) {
  probabilities<float, Reduced>(space, shape, QKV, P, P_kept, gemm);
}

template <class Reduced>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<Reduced>& QKV, const tensor::ConstMatrix<Reduced>& P,
                             const tensor::ConstMatrix<Reduced>& dO, const tensor::Matrix<float>& dP,
                             const tensor::Matrix<Reduced>& dS, const tensor::Matrix<float>& dQKV, GemmPath gemm) {
  backward_products<float, Reduced>(space, shape, QKV, P, dO, dP, dS, dQKV, gemm);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                 \
  template void attention_forward_gemm<Scalar>(const tensor::ExecutionSpace&, const AttentionShape&,              \
                                               const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&, \
                                               const tensor::Matrix<Scalar>&, GemmPath);                          \
  template void attention_probabilities_gemm<Scalar>(const tensor::ExecutionSpace&, const AttentionShape&,        \
                                                     const tensor::ConstMatrix<Scalar>&,                          \
                                                     const tensor::Matrix<Scalar>&, GemmPath);                    \
  template void attention_backward_gemm<Scalar>(                                                                  \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Scalar>&,                   \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
      const tensor::Matrix<Scalar>&, GemmPath);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

#define KPIPE_INSTANTIATE(Reduced)                                                                            \
  template void attention_forward_gemm<Reduced>(                                                              \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Reduced>&,              \
      const tensor::Matrix<float>&, const tensor::Matrix<Reduced>&, const tensor::Matrix<float>&, GemmPath);  \
  template void attention_probabilities_gemm<Reduced>(                                                        \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Reduced>&,              \
      const tensor::Matrix<float>&, const tensor::Matrix<Reduced>&, GemmPath);                                \
  template void attention_backward_gemm<Reduced>(                                                             \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Reduced>&,              \
      const tensor::ConstMatrix<Reduced>&, const tensor::ConstMatrix<Reduced>&, const tensor::Matrix<float>&, \
      const tensor::Matrix<Reduced>&, const tensor::Matrix<float>&, GemmPath);
KPIPE_INSTANTIATE(tensor::BFloat16)
KPIPE_INSTANTIATE(tensor::Half)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
