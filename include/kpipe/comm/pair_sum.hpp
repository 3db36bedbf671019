#pragma once
// The sum of one tensor held by exactly two ranks (a tied matrix's gradient:
// the first and the last pipeline stage, runtime/execution/gradient_sync.hpp), in
// place on both. An all-reduce of N bytes would have MPI hold another N
// bytes for the moment (Open MPI's in-place algorithms copy the whole
// message: 154 MB for GPT-2's token table); the two ranks instead swap the
// tensor in pieces of at most `piece_bytes` and each adds the peer's piece to
// its own. a + b == b + a, so both end with the same bits, those of the
// sequential reference's add. Waits run under the watchdog.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

#include "kpipe/comm/gradient_reducer.hpp"
#include "kpipe/comm/watchdog.hpp"

namespace kpipe::comm {

template <class Scalar>
class PairSum {
 public:
  // A gradient as GradientReducer takes it (comm::flat makes one).
  using MemorySpace = typename GradientReducer<Scalar>::MemorySpace;
  using Flat = typename GradientReducer<Scalar>::Flat;

  // `pair` has two ranks; `stage_through_host`: MPI cannot read device memory.
  PairSum(MPI_Comm pair, std::size_t piece_bytes, bool stage_through_host, const Watchdog& watchdog);

  // tensor += the peer's tensor (the same size on both ranks).
  void sum(const Flat& tensor);
  std::uint64_t bytes_summed() const { return bytes_summed_; }

 private:
  MPI_Comm pair_;
  int peer_;
  bool staged_;
  const Watchdog& watchdog_;
  Kokkos::View<Scalar*, MemorySpace> received_;                         // the peer's piece
  Kokkos::View<Scalar*, Kokkos::HostSpace> host_mine_, host_received_;  // staged through the host
  std::uint64_t bytes_summed_ = 0;
};

}  // namespace kpipe::comm
