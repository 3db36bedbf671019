#pragma once
// Token and position embeddings of a transformer's first stage. Token ids
// arrive as a rows x T matrix of the model's Scalar (exact integers: the
// stage input travels like any activation); the output is rows x (T·dim),
// position t of sequence s at columns [t·dim, (t+1)·dim) of row s.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// Y[s, t·dim + j] = token[ids(s, t) - first, j] + position[p, j], p = t; or,
// where sequences pack documents each closed by the token `separator` (-1:
// none), p = t's place in its document, which begins after the last
// separator before t (data.pack_documents). An id
// outside [0, vocab) is a runtime error naming it (checked on the host copy
// the caller owns, not here: kernels do not throw). `token` may be the rows
// [first, first + rows) of a vocabulary-parallel table: ids outside them take
// a zero token row, so the sum over the shards is the whole lookup. An empty
// `position` adds none (a model whose attention rotates by position), and
// an empty `dposition` in embedding_backward gets no gradient.
template <class Scalar>
void embedding_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                       const tensor::ConstMatrix<tensor::identity_t<Scalar>>& token,
                       const tensor::ConstMatrix<tensor::identity_t<Scalar>>& position, const tensor::Matrix<Scalar>& Y,
                       int first = 0, int separator = -1);

// One token per row, for incremental inference: Y[i, j] = token[ids(i, 0) -
// first, j] + position[positions(i), j] with ids n x 1 and Y n x dim; a
// vocabulary shard's table as in embedding_forward.
template <class Scalar>
void embedding_forward_at(const tensor::ExecutionSpace& space,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                          const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& token,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& position,
                          const tensor::Matrix<Scalar>& Y, int first = 0);

// dtoken[v - first, j] += Σ dY[s, t·dim + j] over the positions (s, t)
// holding token v, in ascending (s, t) order, for the rows [first, first +
// rows) dtoken holds; dposition[p, j] += Σ dY[s, t·dim + j] over the (s, t)
// at position p (as in embedding_forward), in ascending (s, t) order.
// No atomics: each output element is owned by one thread, so the sums are
// bitwise reproducible on every backend.
template <class Scalar>
void embedding_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dtoken,
                        const tensor::Matrix<Scalar>& dposition, int first = 0, int separator = -1);

// Packed documents: positions(s·T + t) = t's place in its document, the
// positions since the last `separator` before t in row s of ids (rows x T),
// all of them where none is: Megatron-LM's reset position ids, the separator
// closing its document. One thread per row.
template <class Scalar>
void document_positions(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& ids,
                        int separator, const Kokkos::View<int*, tensor::MemorySpace>& positions);

}  // namespace kpipe::kernels
