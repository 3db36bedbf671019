#include "kpipe/comm/transport.hpp"

#include <fmt/format.h>

#include <algorithm>

#if defined(KPIPE_ENABLE_GPU_AWARE_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include "kpipe/comm/mpi_types.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::comm {

namespace {

template <class View>
bool same_shape(const View& view, const Message& message) {
  return view.extent_int(0) == message.rows && view.extent_int(1) == message.cols;
}

}  // namespace

bool mpi_reaches_device_memory() {
  using MemorySpace = Kokkos::DefaultExecutionSpace::memory_space;
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible) return true;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

template <class Scalar>
Transport<Scalar>::Transport(MPI_Comm comm, const Watchdog& watchdog, Staging staging,
                             const tensor::ExecutionSpace& space, MPI_Comm scatter_group)
    : comm_(comm),
      watchdog_(watchdog),
      space_(space),
      staged_(staging == Staging::host || !mpi_reaches_device_memory()),
      scatter_group_(scatter_group) {
  MPI_Comm_size(scatter_group_, &parts_);
  MPI_Comm_rank(scatter_group_, &part_);
}

template <class Scalar>
Message Transport<Scalar>::part_of(const Message& message) const {
  if (parts_ == 1) return message;
  if (message.cols % parts_ != 0) {
    throw runtime_error(fmt::format("scatter/gather of a {}x{} message over {} ranks: the width must divide by {}",
                                    message.rows, message.cols, parts_, parts_));
  }
  return {message.peer, message.tag, message.rows, message.cols / parts_};
}

template <class Scalar>
Transport<Scalar>::~Transport() {
  // Only reached with requests open when an error unwinds the step; the job
  // is ending, so cancel rather than wait for peers that may never answer.
  for (auto& pending : receives_) {
    MPI_Cancel(&pending.request);
    MPI_Request_free(&pending.request);
  }
  for (auto& pending : sends_) MPI_Request_free(&pending.request);
}

template <class Scalar>
void Transport<Scalar>::post_receive(const Message& whole) {
  const Message message = part_of(whole);
  Pending pending{message, MPI_REQUEST_NULL, buffers_.take(message.rows, message.cols), {}};
  Scalar* target = pending.data.data();
  if (staged_) {
    pending.staging = staging_buffers_.take(message.rows, message.cols);
    target = pending.staging.data();
  }
  MPI_Irecv(target, message.rows * message.cols, mpi_type<Scalar>(), message.peer, message.tag, comm_,
            &pending.request);
  receives_.push_back(std::move(pending));
  peak_posted_ = std::max(peak_posted_, static_cast<int>(receives_.size()));
}

template <class Scalar>
typename std::vector<typename Transport<Scalar>::Pending>::iterator Transport<Scalar>::find_receive(
    const Message& message) {
  return std::find_if(receives_.begin(), receives_.end(),
                      [&](const Pending& p) { return p.message.peer == message.peer && p.message.tag == message.tag; });
}

template <class Scalar>
void Transport<Scalar>::wait(Pending& pending, FunctionRef<std::string()> what) {
  watchdog_.wait(pending.request, what);
}

template <class Scalar>
typename Transport<Scalar>::Matrix Transport<Scalar>::complete_receive(const Message& whole,
                                                                       FunctionRef<std::string()> what) {
  const Message message = part_of(whole);
  auto it = find_receive(message);
  if (it == receives_.end()) {
    post_receive(whole);
    it = std::prev(receives_.end());
  }
  Pending pending = std::move(*it);
  receives_.erase(it);
  if (!same_shape(pending.data, message)) {
    throw runtime_error(fmt::format("message tag {} from rank {} was posted as {}x{} but is needed as {}x{}",
                                    message.tag, message.peer, pending.message.rows, pending.message.cols, message.rows,
                                    message.cols));
  }
  wait(pending, what);
  if (staged_) {
    // Ordered before every later kernel on the instance; the fence lets the
    // host buffer go back to the pool.
    Kokkos::deep_copy(space_, pending.data, pending.staging);
    space_.fence();
  }
  return parts_ == 1 ? pending.data : gather(pending, whole);
}

template <class Scalar>
typename Transport<Scalar>::Matrix Transport<Scalar>::gather(const Pending& part, const Message& message) {
  const Matrix whole = buffers_.take(message.rows, message.cols);
  const int count = part.message.rows * part.message.cols;
  bytes_gathered_ += static_cast<std::uint64_t>(count) * sizeof(Scalar);
  // The parts in rank order are the message's elements in order: a plain all-gather.
  if (staged_) {
    const HostMatrix host = staging_buffers_.take(message.rows, message.cols);
    MPI_Allgather(part.staging.data(), count, mpi_type<Scalar>(), host.data(), count, mpi_type<Scalar>(),
                  scatter_group_);
    Kokkos::deep_copy(space_, whole, host);
    space_.fence();
  } else {
    MPI_Allgather(part.data.data(), count, mpi_type<Scalar>(), whole.data(), count, mpi_type<Scalar>(), scatter_group_);
  }
  return whole;
}

template <class Scalar>
void Transport<Scalar>::send(const Message& whole, const Matrix& data) {
  const Message message = part_of(whole);
  Pending pending{message, MPI_REQUEST_NULL, data, {}};
  if (parts_ > 1) {
    // This rank's part, the elements [part·n, (part+1)·n) of the whole.
    const Matrix mine(data.data() + static_cast<std::size_t>(part_) * message.rows * message.cols, message.rows,
                      message.cols);
    pending.data = send_parts_.take(message.rows, message.cols);
    Kokkos::deep_copy(space_, pending.data, mine);
  }
  const Scalar* source = pending.data.data();
  if (staged_) {
    pending.staging = staging_buffers_.take(message.rows, message.cols);
    Kokkos::deep_copy(space_, pending.staging, pending.data);
    source = pending.staging.data();
  }
  // Kernels writing `data` may still run on the instance; only they are waited for.
  space_.fence();
  MPI_Isend(source, message.rows * message.cols, mpi_type<Scalar>(), message.peer, message.tag, comm_,
            &pending.request);
  bytes_sent_ += static_cast<std::uint64_t>(message.rows) * message.cols * sizeof(Scalar);
  ++messages_sent_;
  // Retire finished sends so their buffers return to the pool.
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [](Pending& p) {
                                int done = 0;
                                MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
                                return done != 0;
                              }),
               sends_.end());
  sends_.push_back(std::move(pending));
}

template <class Scalar>
void Transport<Scalar>::complete_sends(const std::string& what) {
  for (auto& pending : sends_) {
    wait(pending, [&] {
      return fmt::format("{} (send of tag {} to rank {})", what, pending.message.tag, pending.message.peer);
    });
  }
  sends_.clear();
}

template class Transport<float>;
template class Transport<double>;

}  // namespace kpipe::comm
