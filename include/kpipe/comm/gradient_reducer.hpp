#pragma once
// Data-parallel gradient all-reduce (DESIGN.md §4): the gradients of a stage
// are packed into buckets of bounded size and summed across the replicas with
// one MPI_Allreduce per bucket, instead of one call per tensor. Replicas SUM
// (no division: the loss is already scaled by 1/global_batch), so with two
// replicas the result is bitwise the same on both and equal to a + b.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <vector>

namespace kpipe::comm {

template <class Scalar>
class GradientReducer {
 public:
  using MemorySpace = Kokkos::DefaultExecutionSpace::memory_space;
  // A contiguous tensor seen as a flat array, without owning it.
  using Flat = Kokkos::View<Scalar*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  GradientReducer(MPI_Comm comm, std::size_t bucket_bytes, bool stage_through_host);

  // Sums every tensor across the communicator, in place.
  void sum(const std::vector<Flat>& tensors);

  int allreduce_calls() const { return calls_; }

 private:
  void reduce_bucket(std::size_t count);

  MPI_Comm comm_;
  std::size_t bucket_elements_;
  bool staged_;
  Kokkos::View<Scalar*, MemorySpace> bucket_;
  Kokkos::View<Scalar*, Kokkos::HostSpace> host_bucket_;
  int calls_ = 0;
};

// A View's elements as a Flat view; the View must be contiguous.
template <class Scalar, class View>
typename GradientReducer<Scalar>::Flat flat(const View& view) {
  return typename GradientReducer<Scalar>::Flat(view.data(), view.span());
}

}  // namespace kpipe::comm
