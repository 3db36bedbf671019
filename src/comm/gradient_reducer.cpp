#include "kpipe/comm/gradient_reducer.hpp"

#include <algorithm>

#include "kpipe/comm/mpi_types.hpp"

namespace kpipe::comm {

template <class Scalar>
GradientReducer<Scalar>::GradientReducer(MPI_Comm comm, std::size_t bucket_bytes, bool stage_through_host)
    : comm_(comm),
      bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(Scalar))),
      staged_(stage_through_host) {}

template <class Scalar>
void GradientReducer<Scalar>::reduce_bucket(std::size_t count) {
  const auto bucket = Kokkos::subview(bucket_, std::make_pair(std::size_t{0}, count));
  Scalar* data = bucket.data();
  if (staged_) {
    const auto host = Kokkos::subview(host_bucket_, std::make_pair(std::size_t{0}, count));
    Kokkos::deep_copy(host, bucket);
    data = host.data();
  } else {
    Kokkos::fence();  // the gradients may still be being written
  }
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type<Scalar>(), MPI_SUM, comm_);
  if (staged_) Kokkos::deep_copy(bucket, Kokkos::subview(host_bucket_, std::make_pair(std::size_t{0}, count)));
  ++calls_;
}

template <class Scalar>
void GradientReducer<Scalar>::sum(const std::vector<Flat>& tensors) {
  std::size_t total = 0;
  for (const auto& t : tensors) total += t.extent(0);
  const std::size_t capacity = std::min(total, bucket_elements_);
  if (bucket_.extent(0) < capacity) {
    bucket_ = Kokkos::View<Scalar*, MemorySpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("kpipe::comm::gradient_bucket")), capacity);
    if (staged_) host_bucket_ = Kokkos::create_mirror_view(Kokkos::HostSpace(), bucket_);
  }
  // Pieces of tensors waiting in the bucket: (tensor, offset in tensor, offset in bucket, length).
  struct Piece {
    std::size_t tensor, from, to, length;
  };
  std::vector<Piece> pieces;
  std::size_t filled = 0;
  const auto flush = [&] {
    reduce_bucket(filled);
    for (const auto& p : pieces) {
      Kokkos::deep_copy(Kokkos::subview(tensors[p.tensor], std::make_pair(p.from, p.from + p.length)),
                        Kokkos::subview(bucket_, std::make_pair(p.to, p.to + p.length)));
    }
    pieces.clear();
    filled = 0;
  };
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    // A tensor larger than the bucket is split across buckets.
    for (std::size_t from = 0; from < tensors[t].extent(0);) {
      const std::size_t length = std::min(tensors[t].extent(0) - from, bucket_.extent(0) - filled);
      Kokkos::deep_copy(Kokkos::subview(bucket_, std::make_pair(filled, filled + length)),
                        Kokkos::subview(tensors[t], std::make_pair(from, from + length)));
      pieces.push_back({t, from, filled, length});
      filled += length;
      from += length;
      if (filled == bucket_.extent(0)) flush();
    }
  }
  if (filled > 0) flush();
}

template class GradientReducer<float>;
template class GradientReducer<double>;

}  // namespace kpipe::comm
