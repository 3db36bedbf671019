#pragma once
// Counts Kokkos allocations (number and bytes, per memory space) between
// start() and stop(), through the Kokkos Tools allocation callback, as ArborX
// tests its labels. The callback fires without a loaded tool library on every
// Kokkos version kpipe supports (checked on 3.4.1); a tool that is loaded
// keeps receiving its own allocation events, chained behind ours.
//
// The callback is one process-wide function pointer, so at most one counter
// counts at a time; a second start() throws. Counting makes Kokkos believe a
// tool is loaded, which may add fences around kernels: measure allocations
// with it, not time.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace kpipe::tensor {

struct AllocationTally {
  std::int64_t count = 0;
  std::uint64_t bytes = 0;
};

class AllocationCounter {
 public:
  AllocationCounter() = default;
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  // Forgets earlier counts and counts from now on.
  void start();
  // Stops counting; the counts stay readable. Does nothing when not counting.
  void stop();
  bool counting() const { return counting_; }

  // Everything counted, or only allocations in the memory space of that name
  // ("Host", "Cuda", "CudaUVM", ... as Kokkos names them).
  AllocationTally total() const;
  AllocationTally in(const std::string& memory_space) const;
  const std::map<std::string, AllocationTally>& by_memory_space() const { return by_space_; }
  // Allocations per View label, to say which buffer a test did not expect.
  const std::map<std::string, AllocationTally>& by_label() const { return by_label_; }

 private:
  friend struct AllocationCounterAccess;
  bool counting_ = false;
  std::map<std::string, AllocationTally> by_space_;
  std::map<std::string, AllocationTally> by_label_;
};

}  // namespace kpipe::tensor
