#pragma once
// Packed documents (data.pack_documents): sequences that hold several
// documents, each closed by a separator token. A position's place in its
// document is a function of its sequence's tokens alone, so whoever runs a
// microbatch's F and B — the sequential trainer, or a stage's executor, which
// can draw any microbatch's tokens from the data source — assigns them here
// first, and the layers past the first stage read them: attention's
// block-diagonal causal mask (kernels::DocumentMask) and the rotary
// embedding's positions. The token embedding sees the tokens and finds the
// places itself, in F and in its deferred W alike.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

class Documents {
 public:
  explicit Documents(int separator) : separator_(separator) {}

  int separator() const { return separator_; }
  // The documents of the microbatch whose tokens are `ids` (sequences x T), until the next call.
  template <class Scalar>
  void assign(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& ids);
  // By position s·T + t, t's place in its document, checked to hold `rows`
  // positions: a layer's rows with no documents assigned for them is a logic
  // error naming `layer`.
  Kokkos::View<const int*, tensor::MemorySpace> positions_of(int rows, const char* layer) const;

 private:
  int separator_;
  Kokkos::View<int*, tensor::MemorySpace> positions_;
};

}  // namespace kpipe::model
