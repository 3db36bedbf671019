#pragma once
// Where a stage may move what it keeps for backward while the microbatch
// waits for its B (DESIGN.md §5, "Activation store"). After F the stage puts
// each saved tensor of the microbatch here and drops its own handle, so the
// pooled buffer is free for the next microbatch; before B (or BW) it takes
// them back into fresh pooled buffers. A store copies bytes exactly, so
// results stay bitwise those of a run that keeps everything in memory.
//
// The stage names tensors by where they sit in its layers' contexts
// ("layer3.x", "layer5.0.xhat", "input" for the stage input under
// recomputation); a store keeps one namespace per stage. Implementations live
// above model (runtime's HDF5 store), which depends only on this interface.

#include <string>

#include "kpipe/tensor/tensor.hpp"

namespace kpipe::model {

class StashStore {
 public:
  virtual ~StashStore() = default;

  // Keeps an exact copy of `tensor` as (mb, name), replacing one of that
  // name. Kernels that wrote `tensor` may still be queued on the stage's
  // instance: the store orders its copy after them, and `tensor` may be
  // reused as soon as put returns.
  virtual void put(int mb, const std::string& name, const tensor::Tensor& tensor) = 0;

  // Writes the copy of (mb, name) into `into` (of the spec it was put with)
  // and forgets it. Throws when absent or of another spec.
  virtual void take(int mb, const std::string& name, const tensor::Tensor& into) = 0;
};

}  // namespace kpipe::model
