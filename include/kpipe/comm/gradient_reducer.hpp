#pragma once
// Data-parallel gradient all-reduce (DESIGN.md §4). Gradients are handed over
// in groups as they become final (a layer's, once its last microbatch's weight
// gradient is accumulated) and summed across the replicas with nonblocking
// MPI_Iallreduce calls, so the sums travel while the rest of the backward
// pass runs (Megatron-LM's and PyTorch DDP's overlap). A tensor of at least
// `in_place_bytes` that MPI can read is summed where it lies; smaller ones
// (biases, norm scales), and all of them when staged through the host, are
// packed into buckets of bounded size, one call per bucket. Open MPI moves a nonblocking collective only inside
// MPI calls: progress() between actions keeps it going. Replicas SUM (no
// division: the loss is already scaled by 1/global_batch), so with two
// replicas the result is bitwise the same on both and equal to a + b.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kpipe/comm/watchdog.hpp"

namespace kpipe::comm {

template <class Scalar>
class GradientReducer {
 public:
  using MemorySpace = Kokkos::DefaultExecutionSpace::memory_space;
  // A contiguous tensor seen as a flat array, without owning it.
  using Flat = Kokkos::View<Scalar*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  // `watchdog` bounds the wait in finish(); it must outlive the reducer.
  GradientReducer(MPI_Comm comm, std::size_t bucket_bytes, std::size_t in_place_bytes, bool stage_through_host,
                  const Watchdog& watchdog);

  // Starts summing `tensors` across the communicator and returns; they must
  // not change until finish(). Every rank starts the same groups in the same
  // order. Buckets are kept and reused by the next step's same start.
  void start(const std::vector<Flat>& tensors);
  // Advances the sums in flight; true when none is left.
  bool progress();
  // Waits for every sum started since the last finish and writes it back, in place.
  void finish();
  // start, then finish.
  void sum(const std::vector<Flat>& tensors);

  int allreduce_calls() const { return calls_; }
  // Bytes of this rank's gradients summed so far (each rank's contribution).
  std::uint64_t bytes_summed() const { return bytes_summed_; }

 private:
  // Where a piece of a tensor waits in a bucket.
  struct Piece {
    Flat tensor;
    std::size_t from, to, length;
  };
  struct Bucket {
    Kokkos::View<Scalar*, MemorySpace> data;
    Kokkos::View<Scalar*, Kokkos::HostSpace> host;  // the MPI buffer when staged through the host
    std::size_t size = 0;                           // elements in use this time
    std::size_t filled = 0;
    std::vector<Piece> pieces;
  };

  // The first bucket not in use, holding `size` elements.
  Bucket& next_bucket(std::size_t size);
  // Starts the sum of `count` elements at `data`.
  void send(Scalar* data, std::size_t count);
  void send(Bucket& bucket);

  MPI_Comm comm_;
  std::size_t bucket_elements_;
  std::size_t in_place_elements_;
  bool staged_;
  const Watchdog& watchdog_;
  std::vector<Bucket> buckets_;
  std::size_t buckets_in_use_ = 0;     // buckets_[0, in use) hold sums started since the last finish
  std::vector<MPI_Request> requests_;  // every sum started since the last finish
  int calls_ = 0;
  std::uint64_t bytes_summed_ = 0;
};

// A View's elements as a Flat view; the View must be contiguous.
template <class Scalar, class View>
typename GradientReducer<Scalar>::Flat flat(const View& view) {
  return typename GradientReducer<Scalar>::Flat(view.data(), view.span());
}

}  // namespace kpipe::comm
