#include "kpipe/comm/gradient_reducer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/comm/mpi_types.hpp"

namespace kpipe::comm {

namespace {

template <class View>
auto first(const View& view, std::size_t from, std::size_t length) {
  return Kokkos::subview(view, std::make_pair(from, from + length));
}

}  // namespace

template <class Scalar>
GradientReducer<Scalar>::GradientReducer(MPI_Comm comm, std::size_t bucket_bytes, bool stage_through_host,
                                         const Watchdog& watchdog)
    : comm_(comm),
      bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(Scalar))),
      staged_(stage_through_host),
      watchdog_(watchdog) {}

template <class Scalar>
typename GradientReducer<Scalar>::Bucket& GradientReducer<Scalar>::next_bucket(std::size_t size) {
  // Buckets [0, in flight) hold sums on their way; the next one is free to refill.
  const std::size_t index = requests_.size();
  if (buckets_.size() <= index) buckets_.resize(index + 1);
  Bucket& bucket = buckets_[index];
  if (bucket.data.extent(0) < size) {
    bucket.data = Kokkos::View<Scalar*, MemorySpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("kpipe::comm::gradient_bucket")), size);
    if (staged_) bucket.host = Kokkos::create_mirror_view(Kokkos::HostSpace(), bucket.data);
  }
  bucket.size = size;
  bucket.filled = 0;
  bucket.pieces.clear();
  return bucket;
}

template <class Scalar>
void GradientReducer<Scalar>::send(Bucket& bucket) {
  // The packing deep_copy fenced: every gradient kernel is done.
  Scalar* data = bucket.data.data();
  if (staged_) {
    Kokkos::deep_copy(first(bucket.host, 0, bucket.size), first(bucket.data, 0, bucket.size));
    data = bucket.host.data();
  }
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(bucket.size), mpi_type<Scalar>(), MPI_SUM, comm_, &request);
  requests_.push_back(request);
  ++calls_;
}

template <class Scalar>
void GradientReducer<Scalar>::start(const std::vector<Flat>& tensors) {
  std::size_t remaining = 0;
  for (const auto& t : tensors) remaining += t.extent(0);
  if (remaining == 0) return;
  progress();
  Bucket* bucket = &next_bucket(std::min(remaining, bucket_elements_));
  for (const Flat& tensor : tensors) {
    // A tensor larger than the bucket is split across buckets.
    for (std::size_t from = 0; from < tensor.extent(0);) {
      const std::size_t length = std::min(tensor.extent(0) - from, bucket->size - bucket->filled);
      Kokkos::deep_copy(first(bucket->data, bucket->filled, length), first(tensor, from, length));
      bucket->pieces.push_back({tensor, from, bucket->filled, length});
      bucket->filled += length;
      from += length;
      remaining -= length;
      if (bucket->filled == bucket->size) {
        send(*bucket);
        if (remaining > 0) bucket = &next_bucket(std::min(remaining, bucket_elements_));
      }
    }
  }
}

template <class Scalar>
bool GradientReducer<Scalar>::progress() {
  if (requests_.empty()) return true;
  int done = 0;
  MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
  return done != 0;
}

template <class Scalar>
void GradientReducer<Scalar>::finish() {
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    watchdog_.wait(requests_[i], [&] {
      return fmt::format("for the data-parallel gradient sum (bucket {} of {}) of the other replicas", i + 1,
                         requests_.size());
    });
    Bucket& bucket = buckets_[i];
    if (staged_) Kokkos::deep_copy(first(bucket.data, 0, bucket.size), first(bucket.host, 0, bucket.size));
    for (const Piece& p : bucket.pieces) {
      Kokkos::deep_copy(first(p.tensor, p.from, p.length), first(bucket.data, p.to, p.length));
    }
  }
  requests_.clear();
}

template <class Scalar>
void GradientReducer<Scalar>::sum(const std::vector<Flat>& tensors) {
  start(tensors);
  finish();
}

template class GradientReducer<float>;
template class GradientReducer<double>;

}  // namespace kpipe::comm
