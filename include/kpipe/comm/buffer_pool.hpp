#pragma once
// A pool of equally shaped Kokkos Views for per-microbatch tensors: a buffer
// is free again as soon as nobody but the pool holds it (use_count() == 1), so
// callers simply drop their handles. On CUDA this keeps cudaMalloc out of the
// steady state; the pool's size is the peak number of tensors alive at once.

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

namespace kpipe::comm {

template <class View>
class BufferPool {
 public:
  explicit BufferPool(std::string label) : label_(std::move(label)) {}

  // A rows x cols buffer with undefined contents.
  View take(int rows, int cols) {
    for (const auto& buffer : buffers_) {
      if (buffer.use_count() == 1 && buffer.extent_int(0) == rows && buffer.extent_int(1) == cols) return buffer;
    }
    buffers_.push_back(View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label_), rows, cols));
    return buffers_.back();
  }

  std::size_t size() const { return buffers_.size(); }

 private:
  std::string label_;
  std::vector<View> buffers_;
};

}  // namespace kpipe::comm
