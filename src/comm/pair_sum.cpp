#include "kpipe/comm/pair_sum.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "kpipe/comm/detail/mpi_types.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::comm {

template <class Scalar>
PairSum<Scalar>::PairSum(MPI_Comm pair, std::size_t piece_bytes, bool stage_through_host, const Watchdog& watchdog)
    : pair_(pair), staged_(stage_through_host), watchdog_(watchdog) {
  int size = 0, rank = 0;
  MPI_Comm_size(pair, &size);
  MPI_Comm_rank(pair, &rank);
  if (size != 2) throw runtime_error(fmt::format("PairSum needs a communicator of 2 ranks, not {}", size));
  peer_ = 1 - rank;
  const std::size_t piece = std::max<std::size_t>(1, piece_bytes / sizeof(Scalar));
  received_ = Kokkos::View<Scalar*, MemorySpace>(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("kpipe::comm::pair_sum_received")), piece);
  if (staged_) {
    host_mine_ = Kokkos::View<Scalar*, Kokkos::HostSpace>("kpipe::comm::pair_sum_host_mine", piece);
    host_received_ = Kokkos::View<Scalar*, Kokkos::HostSpace>("kpipe::comm::pair_sum_host_received", piece);
  }
}

template <class Scalar>
void PairSum<Scalar>::sum(const Flat& tensor) {
  const std::size_t n = tensor.extent(0), piece = received_.extent(0);
  constexpr int tag = 0x7e1d;  // the only messages on this communicator
  for (std::size_t from = 0; from < n; from += piece) {
    const std::size_t count = std::min(piece, n - from);
    const auto mine = Kokkos::subview(tensor, std::make_pair(from, from + count));
    const auto theirs = Kokkos::subview(received_, std::make_pair(std::size_t{0}, count));
    Scalar* send = mine.data();
    Scalar* receive = theirs.data();
    Kokkos::fence();  // the gradient kernels (or the last piece's add) wrote `mine`
    if (staged_) {
      Kokkos::deep_copy(Kokkos::subview(host_mine_, std::make_pair(std::size_t{0}, count)), mine);
      send = host_mine_.data();
      receive = host_received_.data();
    }
    MPI_Request requests[2];
    MPI_Irecv(receive, static_cast<int>(count), mpi_type<Scalar>(), peer_, tag, pair_, &requests[0]);
    MPI_Isend(send, static_cast<int>(count), mpi_type<Scalar>(), peer_, tag, pair_, &requests[1]);
    for (auto& request : requests) {
      watchdog_.wait(request, [] { return std::string("for the tied gradient's sum with the other end's rank"); });
    }
    if (staged_) {
      Kokkos::deep_copy(theirs, Kokkos::subview(host_received_, std::make_pair(std::size_t{0}, count)));
    }
    Kokkos::parallel_for(
        "kpipe::comm::pair_sum_add", Kokkos::RangePolicy<>(0, count),
        KOKKOS_LAMBDA(std::size_t i) { mine(i) += theirs(i); });
    bytes_summed_ += count * sizeof(Scalar);
  }
  Kokkos::fence();
}

template class PairSum<float>;
template class PairSum<double>;

}  // namespace kpipe::comm
