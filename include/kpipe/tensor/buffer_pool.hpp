#pragma once
// A pool of Kokkos Views of one type and label, for tensors that live per
// microbatch or per message. A buffer is free again as soon as nobody but the
// pool holds it (use_count() == 1), so callers simply drop their handles. On
// CUDA this keeps cudaMalloc out of the steady state; the pool's size is the
// peak number of buffers of each shape alive at once.
//
// Reuse is safe without a fence as long as every kernel touching the buffers
// runs on one in-order execution-space instance (one CUDA stream): a kernel
// that writes a reused buffer is queued behind every kernel that read it
// before its handles were dropped. Buffers shared across instances (MPI
// staging, another stream) must be fenced by their user before release.

#include <Kokkos_Core.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kpipe::tensor {

template <class View>
class BufferPool {
 public:
  explicit BufferPool(std::string label) : label_(std::move(label)) {}

  // A buffer with these extents (one per rank of View) and undefined contents.
  template <class... Extents>
  View take(Extents... extents) {
    static_assert(sizeof...(Extents) == static_cast<std::size_t>(View::rank),
                  "BufferPool::take needs one extent per dimension of the pooled View");
    const std::array<std::size_t, sizeof...(Extents)> wanted{static_cast<std::size_t>(extents)...};
    for (const auto& buffer : buffers_) {
      if (buffer.use_count() == 1 && has_extents(buffer, wanted)) return buffer;
    }
    buffers_.push_back(View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label_), extents...));
    return buffers_.back();
  }

  const std::string& label() const { return label_; }
  // Buffers allocated so far, free or not.
  std::size_t size() const { return buffers_.size(); }
  std::size_t bytes() const {
    std::size_t total = 0;
    for (const auto& buffer : buffers_) total += buffer.span() * sizeof(typename View::value_type);
    return total;
  }

 private:
  template <std::size_t Rank>
  static bool has_extents(const View& buffer, const std::array<std::size_t, Rank>& wanted) {
    for (std::size_t d = 0; d < Rank; ++d) {
      if (buffer.extent(d) != wanted[d]) return false;
    }
    return true;
  }

  std::string label_;
  std::vector<View> buffers_;
};

}  // namespace kpipe::tensor
