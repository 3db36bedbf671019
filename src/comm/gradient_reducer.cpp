#include "kpipe/comm/gradient_reducer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/comm/detail/mpi_types.hpp"

namespace kpipe::comm {

namespace {

template <class View>
auto first(const View& view, std::size_t from, std::size_t length) {
  return Kokkos::subview(view, std::make_pair(from, from + length));
}

}  // namespace

template <class Scalar>
GradientReducer<Scalar>::GradientReducer(MPI_Comm comm, std::size_t bucket_bytes, std::size_t in_place_bytes,
                                         bool stage_through_host, const Watchdog& watchdog)
    : comm_(comm),
      bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(Scalar))),
      in_place_elements_(std::max<std::size_t>(1, in_place_bytes / sizeof(Scalar))),
      staged_(stage_through_host),
      watchdog_(watchdog) {}

template <class Scalar>
typename GradientReducer<Scalar>::Bucket& GradientReducer<Scalar>::next_bucket(std::size_t size) {
  const std::size_t index = buckets_in_use_++;
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
void GradientReducer<Scalar>::send(Scalar* data, std::size_t count) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type<Scalar>(), MPI_SUM, comm_, &request);
  requests_.push_back(request);
  ++calls_;
  bytes_summed_ += count * sizeof(Scalar);
}

template <class Scalar>
void GradientReducer<Scalar>::send(Bucket& bucket) {
  // The packing deep_copy fenced: every gradient kernel is done.
  if (staged_) {
    Kokkos::deep_copy(first(bucket.host, 0, bucket.size), first(bucket.data, 0, bucket.size));
    send(bucket.host.data(), bucket.size);
  } else {
    send(bucket.data.data(), bucket.size);
  }
}

template <class Scalar>
void GradientReducer<Scalar>::start(const std::vector<Flat>& tensors) {
  progress();
  std::vector<Flat> packed;
  std::size_t remaining = 0;
  for (const Flat& tensor : tensors) {
    if (!staged_ && tensor.extent(0) >= in_place_elements_) {
      Kokkos::fence();  // the gradient kernels wrote it
      send(tensor.data(), tensor.extent(0));
    } else if (tensor.extent(0) > 0) {
      packed.push_back(tensor);
      remaining += tensor.extent(0);
    }
  }
  if (remaining == 0) return;
  Bucket* bucket = &next_bucket(std::min(remaining, bucket_elements_));
  for (const Flat& tensor : packed) {
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
      return fmt::format("for the data-parallel gradient sum (call {} of {}) of the other replicas", i + 1,
                         requests_.size());
    });
  }
  for (std::size_t i = 0; i < buckets_in_use_; ++i) {
    Bucket& bucket = buckets_[i];
    if (staged_) Kokkos::deep_copy(first(bucket.data, 0, bucket.size), first(bucket.host, 0, bucket.size));
    for (const Piece& p : bucket.pieces) {
      Kokkos::deep_copy(first(p.tensor, p.from, p.length), first(bucket.data, p.to, p.length));
    }
  }
  requests_.clear();
  buckets_in_use_ = 0;
}

template <class Scalar>
void GradientReducer<Scalar>::sum(const std::vector<Flat>& tensors) {
  start(tensors);
  finish();
}

template class GradientReducer<float>;
template class GradientReducer<double>;

}  // namespace kpipe::comm
