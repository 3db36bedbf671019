#pragma once
// Causal multi-head self-attention, the core of a transformer block between
// its QKV and output projections, in two interchangeable paths
// (compute.attention):
//
//   gemm:  S = Q K^T / sqrt(hd) and O = P V as batched GEMMs through the GEMM
//          dispatch, with one fused causal-softmax kernel in between; forward
//          keeps the probabilities P (batch·heads·T·T) for backward.
//   fused: one Kokkos TeamPolicy kernel per (sequence, head, query tile) that
//          streams key/value tiles through team scratch with an online
//          softmax, keeping only O and the row log-sum-exp L (batch·heads·T);
//          backward recomputes the probabilities tile by tile from L.
//
// Layout: a projection's rows are positions (sequence-major: row s·T + t),
// its columns heads·hd features, head h at columns [h·hd, (h+1)·hd). The
// gemm path works on the projections themselves: its batched products read
// and write each head's T x hd blocks in place, rows 3·dim (or dim) apart. The
// fused kernels take heads-major stacks: Q, K, V, O are (batch·heads·T) x hd,
// block (s·heads + h) the T x hd matrix of sequence s, head h. Position t
// attends to positions 0..t of its own sequence only, or, where sequences pack
// several documents, to those of its own document (DocumentMask). Every kernel
// is deterministic (no atomics), so results are bitwise reproducible.

#include <string_view>
#include <utility>

#include "kpipe/kernels/choices.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Packed documents (data.pack_documents): each position's place in its
// document (kernels::document_positions), so that a query attends to the keys
// of its own document only, a block-diagonal causal mask. Empty: each
// sequence is one document, and every kernel computes what it computes
// without a mask.
struct DocumentMask {
  Kokkos::View<const int*, tensor::MemorySpace> positions;  // by position s·T + t
  int heads = 1;                                            // heads per sequence in the stacks

  // The first key that stack row r (query t = r % T of block r / T) attends
  // to: its document's first position, which never decreases with t.
  KOKKOS_INLINE_FUNCTION int first_key(int r, int tokens) const {
    const int t = r % tokens;
    return positions.extent(0) == 0 ? 0 : t - positions(r / tokens / heads * tokens + t);
  }
};

// The sizes of one attention call; batch_heads = sequences · heads.
struct AttentionShape {
  AttentionShape() = default;
  AttentionShape(int batch_heads, int tokens, int head_dim, DocumentMask documents = {})
      : batch_heads(batch_heads), tokens(tokens), head_dim(head_dim), documents(std::move(documents)) {}

  int batch_heads = 0;
  int tokens = 0;    // T
  int head_dim = 0;  // hd
  DocumentMask documents;
};

// heads-major (batch·heads·T) x hd stack from columns [offset + h·hd, offset +
// (h+1)·hd) of the position-major X ((batch·T) x cols). offset selects Q (0),
// K (dim) or V (2·dim) of a fused QKV projection.
template <class Scalar>
void split_heads(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                 int offset, int heads, int tokens, const tensor::Matrix<Scalar>& stacked);

// The inverse: writes the stack into columns [offset, offset + heads·hd) of X,
// leaving its other columns unchanged.
template <class Scalar>
void merge_heads(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& stacked,
                 int offset, int heads, int tokens, const tensor::Matrix<Scalar>& X);

// gemm path, forward, on the projections: QKV ((batch·T) x 3·heads·hd, the
// fused Q|K|V projection) in, O ((batch·T) x heads·hd, the heads side by side
// as the output projection reads them) out. P ((batch·heads·T) x T, a stack of
// T x T blocks like the fused path's, zero above the diagonal) is kept for
// backward.
template <class Scalar>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV, const tensor::Matrix<Scalar>& P,
                            const tensor::Matrix<Scalar>& O, GemmPath gemm);

// gemm path, the probabilities alone: P as attention_forward_gemm leaves it,
// bitwise (pipeline.recompute = "selective" rebuilds them in backward).
template <class Scalar>
void attention_probabilities_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV,
                                  const tensor::Matrix<Scalar>& P, GemmPath gemm);

// gemm path, backward: the projection's gradient dQKV (every column written)
// from dO (laid out as O), the forward's QKV and its P; dP is scratch of P's shape.
template <class Scalar>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& P,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                             const tensor::Matrix<Scalar>& dP, const tensor::Matrix<Scalar>& dQKV, GemmPath gemm);

// The gemm path under compute.precision = bf16 and fp16: the products take
// Reduced (tensor::BFloat16 or tensor::Half) operands with float32 sums
// (gemm_batched_mixed); the softmax and its gradient run in float32. Forward:
// QKV rounded to Reduced in, the scores and probabilities in P (float32
// scratch), the probabilities rounded into P_kept (what backward takes, and
// the second product's operand), O in float32. Backward: dO rounded to
// Reduced, the kept QKV and P; dP (float32) and dS (Reduced: the softmax's
// gradient rounded, the last two products' operand) are scratch of P's shape.
template <class Reduced>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<Reduced>& QKV, const tensor::Matrix<float>& P,
                            const tensor::Matrix<Reduced>& P_kept, const tensor::Matrix<float>& O, GemmPath gemm);
template <class Reduced>
void attention_probabilities_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                                  const tensor::ConstMatrix<Reduced>& QKV, const tensor::Matrix<float>& P,
                                  const tensor::Matrix<Reduced>& P_kept, GemmPath gemm);
template <class Reduced>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<Reduced>& QKV, const tensor::ConstMatrix<Reduced>& P,
                             const tensor::ConstMatrix<Reduced>& dO, const tensor::Matrix<float>& dP,
                             const tensor::Matrix<Reduced>& dS, const tensor::Matrix<float>& dQKV, GemmPath gemm);

// fused path, forward: O and the log-sum-exp L ((batch·heads·T) x 1) of each
// query's scaled, masked scores.
template <class Scalar>
void attention_forward_fused(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V, const tensor::Matrix<Scalar>& O,
                             const tensor::Matrix<Scalar>& L);

// fused path, backward: dQ, dK, dV from dO, O and L, recomputing the
// probabilities; D ((batch·heads·T) x 1) is scratch for rowsum(dO ∘ O).
template <class Scalar>
void attention_backward_fused(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& O,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& L,
                              const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                              const tensor::Matrix<Scalar>& D, const tensor::Matrix<Scalar>& dQ,
                              const tensor::Matrix<Scalar>& dK, const tensor::Matrix<Scalar>& dV);

}  // namespace kpipe::kernels
