#include "kpipe/tensor/allocation_counter.hpp"

#include <Kokkos_Core.hpp>

#include "kpipe/core/error.hpp"

namespace kpipe::tensor {

struct AllocationCounterAccess {
  static void record(AllocationCounter& counter, const char* space, const char* label, std::uint64_t size) {
    auto& by_space = counter.by_space_[space];
    ++by_space.count;
    by_space.bytes += size;
    auto& by_label = counter.by_label_[label];
    ++by_label.count;
    by_label.bytes += size;
  }
};

namespace {

// The one counter that counts, and the callback installed before it.
AllocationCounter* active = nullptr;
Kokkos::Tools::allocateDataFunction previous = nullptr;

// Zero-byte events allocate nothing and are not counted: Kokkos' CUDA backend
// reports one ("Kokkos::CudaSpace::TeamScratchMemory", 0 bytes) at every team
// launch that asks no level-1 scratch (4.6.01, CudaInternal::resize_team_scratch_space).
void on_allocate(Kokkos::Profiling::SpaceHandle handle, const char* label, const void* pointer, std::uint64_t size) {
  if (active != nullptr && size > 0) AllocationCounterAccess::record(*active, handle.name, label, size);
  if (previous != nullptr) previous(handle, label, pointer, size);
}

}  // namespace

AllocationCounter::~AllocationCounter() { stop(); }

void AllocationCounter::start() {
  if (active != nullptr && active != this) {
    throw runtime_error("an allocation counter is already counting; stop it before starting another");
  }
  by_space_.clear();
  by_label_.clear();
  if (active == nullptr) {
    previous = Kokkos::Tools::Experimental::get_callbacks().allocate_data;
    Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
  }
  active = this;
  counting_ = true;
}

void AllocationCounter::stop() {
  if (!counting_) return;
  Kokkos::Tools::Experimental::set_allocate_data_callback(previous);
  previous = nullptr;
  active = nullptr;
  counting_ = false;
}

AllocationTally AllocationCounter::total() const {
  AllocationTally sum;
  for (const auto& entry : by_space_) {
    sum.count += entry.second.count;
    sum.bytes += entry.second.bytes;
  }
  return sum;
}

AllocationTally AllocationCounter::in(const std::string& memory_space) const {
  const auto it = by_space_.find(memory_space);
  return it == by_space_.end() ? AllocationTally{} : it->second;
}

}  // namespace kpipe::tensor
