#pragma once
// Causal self-attention of a serving microbatch against a paged KV cache
// (DESIGN.md §5b): the incremental counterpart of attention.hpp's kernels.
// A microbatch is n tokens, each of some sequence at some position; tokens of
// many sequences (decodes, prefill chunks) share one call. The K and V of
// every position a stage has seen live in pools of blocks · block_tokens
// rows x dim (heads · hd, head h at columns [h·hd, (h+1)·hd), as in a
// projection); a sequence's position p sits in row
//   blocks(seq, p / block_tokens) · block_tokens + p % block_tokens,
// its blocks anywhere in the pools.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Where the n tokens of a microbatch read and write a paged KV cache. Built
// on the host once per microbatch; holds device Views only, so kernels may
// capture it by value.
struct PagedTokens {
  using Indices = Kokkos::View<const int*, tensor::MemorySpace>;
  using Table = Kokkos::View<const int**, Kokkos::LayoutRight, tensor::MemorySpace>;

  Indices slot;      // n: the pool row this token's K and V go to
  Indices position;  // n: its position in its sequence
  Indices sequence;  // n: its sequence's row of `blocks`
  Table blocks;      // sequences of the microbatch x blocks: the block numbers of each, in position order
  int block_tokens = 0;

  int tokens() const { return static_cast<int>(slot.extent(0)); }
};

// First writes each token's K and V (columns [dim, 2·dim) and [2·dim, 3·dim)
// of its row of the fused QKV projection, n x 3·dim) into row slot(i) of the
// pools K and V; then token i attends to positions 0..position(i) of its own
// sequence, all read from the pools, so the K and V of those positions must
// already be there (written by this call or an earlier one). O is n x dim.
// Grouped-query attention: pools of dim / g features hold each key and value
// head once, which the projection repeats for the g consecutive query heads
// that share it (model::RotaryQKV); query head h reads pool head h / g.
//
// Each (token, head) is one team that walks the positions in ascending
// tiles with an online softmax, in an order that depends on the position
// alone: a token's output is bitwise the same whichever microbatch carries
// it, so a prompt gives the same result chunked or whole. No atomics.
//
// The pools hold Stored: Scalar, or for float bfloat16 or float16
// (compute.precision = bf16, fp16: twice the tokens in the same bytes). K and
// V are rounded as they are written and widened exactly as they are read;
// scores, softmax and sums stay in Scalar.
template <class Scalar, class Stored = Scalar>
void attention_cached(const tensor::ExecutionSpace& space, int heads, const PagedTokens& tokens,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& QKV, const tensor::Matrix<Stored>& K,
                      const tensor::Matrix<Stored>& V, const tensor::Matrix<Scalar>& O);

}  // namespace kpipe::kernels
