#pragma once
// Rotary position embeddings (Su et al. 2021, RoFormer) in Hugging Face's
// rotate-half convention, and grouped-query attention's key/value heads
// (Ainslie et al. 2023), in one pass from a grouped QKV projection to the
// Q|K|V the attention kernels read (attention.hpp).
//
// The grouped projection's row holds `groups` blocks, each [the group's
// per_group query heads | its key head | its value head] of head_dim
// features: Megatron-LM's GQA layout, which a column-parallel split cuts into
// whole groups. The output row is [Q | K | V] of the chosen query heads each
// (all groups·per_group of them, or a contiguous range where t ranks share
// fewer key/value heads), every key and value head repeated for the queries
// of its group, Q and K
// rotated by their position p: features (x_i, x_{i+hd/2}) by the angle
// p·theta^(-2i/hd), i < hd/2. The position of row r is r % tokens in
// training (sequences of `tokens` rows), or positions(r) where given: in
// serving, and in training on packed documents (the position in the document).

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

struct RotaryShape {
  int tokens = 0;     // T: rows per sequence
  int groups = 0;     // key/value heads
  int per_group = 0;  // query heads per key/value head
  int head_dim = 0;   // hd, even
  // The query heads that the output holds: [first_query, first_query +
  // queries) of the groups·per_group, in order; queries = 0: all of them.
  int first_query = 0;
  int queries = 0;

  int heads() const { return queries == 0 ? groups * per_group : queries; }
  int grouped_width() const { return groups * (per_group + 2) * head_dim; }
  int output_width() const { return 3 * heads() * head_dim; }
};

// cos and sin of every angle: `positions` x hd/2 each, computed in double.
template <class Scalar>
void rotary_tables(const tensor::ExecutionSpace& space, int head_dim, double theta, const tensor::Matrix<Scalar>& cos,
                   const tensor::Matrix<Scalar>& sin);

// Y (rows x output_width) from the grouped projection X (rows x
// grouped_width). `positions` empty: row r is position r % tokens.
template <class Scalar>
void rotary_qkv_forward(const tensor::ExecutionSpace& space, const RotaryShape& shape,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& cos,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sin,
                        const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                        const tensor::Matrix<Scalar>& Y);

// dX from dY, rows at the positions forward took: Q and K rotated back, each
// key and value head's gradient the sum over its group's repeats in ascending
// order (zero for the query heads the output leaves out, and for a group none
// of its heads is in).
template <class Scalar>
void rotary_qkv_backward(const tensor::ExecutionSpace& space, const RotaryShape& shape,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& cos,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sin,
                         const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                         const tensor::Matrix<Scalar>& dX);

}  // namespace kpipe::kernels
