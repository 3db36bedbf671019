#include "kpipe/comm/transport.hpp"

#include <fmt/format.h>

#include <algorithm>

#if defined(KPIPE_ENABLE_GPU_AWARE_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include "kpipe/comm/detail/mpi_types.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::comm {

namespace {

std::size_t bytes_of(const Message& message) {
  return static_cast<std::size_t>(message.rows) * message.cols * tensor::size_of(message.dtype);
}

MPI_Datatype mpi_type_of(tensor::DType dtype) {
  return tensor::with_element_type(dtype, [](auto element) { return mpi_type<decltype(element)>(); });
}

// A rows x cols matrix of T in a host staging buffer.
template <class T>
using HostMatrix = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class T>
HostMatrix<T> host_view(const Kokkos::View<unsigned char*, Kokkos::HostSpace>& bytes, int rows, int cols) {
  return HostMatrix<T>(reinterpret_cast<T*>(bytes.data()), static_cast<std::size_t>(rows),
                       static_cast<std::size_t>(cols));
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

Transport::Pools::Pools(const std::string& label)
    : pools_(tensor::BufferPool<tensor::Matrix<float>>(label), tensor::BufferPool<tensor::Matrix<double>>(label),
             tensor::BufferPool<tensor::Matrix<tensor::BFloat16>>(label),
             tensor::BufferPool<tensor::Matrix<tensor::Half>>(label)) {}

Transport::Transport(MPI_Comm comm, const Watchdog& watchdog, Staging staging, const tensor::ExecutionSpace& space,
                     MPI_Comm scatter_group)
    : comm_(comm),
      watchdog_(watchdog),
      space_(space),
      staged_(staging == Staging::host || !mpi_reaches_device_memory()),
      scatter_group_(scatter_group) {
  MPI_Comm_size(scatter_group_, &parts_);
  MPI_Comm_rank(scatter_group_, &part_);
}

Message Transport::part_of(const Message& message) const {
  if (parts_ == 1) return message;
  if (message.cols % parts_ != 0) {
    throw runtime_error(fmt::format("scatter/gather of a {}x{} message over {} ranks: the width must divide by {}",
                                    message.rows, message.cols, parts_, parts_));
  }
  return {message.peer, message.tag, message.rows, message.cols / parts_, message.dtype};
}

Transport::~Transport() {
  // Only reached with requests open when an error unwinds the step; the job
  // is ending, so cancel rather than wait for peers that may never answer.
  for (auto& pending : receives_) {
    MPI_Cancel(&pending.request);
    MPI_Request_free(&pending.request);
  }
  for (auto& pending : sends_) MPI_Request_free(&pending.request);
}

void Transport::post_receive(const Message& whole) {
  const Message message = part_of(whole);
  Pending pending{message, MPI_REQUEST_NULL, {}, {}};
  void* target = nullptr;
  tensor::with_element_type(message.dtype, [&](auto type) {
    using T = decltype(type);
    const auto buffer = buffers_.take<T>(message.rows, message.cols);
    target = buffer.data();
    pending.data = buffer;
  });
  if (staged_) {
    pending.staging = staging_buffers_.take(bytes_of(message));
    target = pending.staging.data();
  }
  MPI_Irecv(target, message.rows * message.cols, mpi_type_of(message.dtype), message.peer, message.tag, comm_,
            &pending.request);
  receives_.push_back(std::move(pending));
  peak_posted_ = std::max(peak_posted_, static_cast<int>(receives_.size()));
}

std::vector<Transport::Pending>::iterator Transport::find_receive(const Message& message) {
  return std::find_if(receives_.begin(), receives_.end(),
                      [&](const Pending& p) { return p.message.peer == message.peer && p.message.tag == message.tag; });
}

void Transport::wait(Pending& pending, FunctionRef<std::string()> what) { watchdog_.wait(pending.request, what); }

template <class T>
tensor::Matrix<T> Transport::complete_receive(const Message& whole, FunctionRef<std::string()> what) {
  const Message message = part_of(whole);
  if (message.dtype != tensor::dtype_of<T>()) {
    throw runtime_error(fmt::format("message tag {} from rank {} is {}, but a {} matrix was asked for", message.tag,
                                    message.peer, tensor::name_of(message.dtype),
                                    tensor::name_of(tensor::dtype_of<T>())));
  }
  auto it = find_receive(message);
  if (it == receives_.end()) {
    post_receive(whole);
    it = std::prev(receives_.end());
  }
  Pending pending = std::move(*it);
  receives_.erase(it);
  if (pending.message.rows != message.rows || pending.message.cols != message.cols ||
      pending.message.dtype != message.dtype) {
    throw runtime_error(fmt::format("message tag {} from rank {} was posted as {}x{} {} but is needed as {}x{} {}",
                                    message.tag, message.peer, pending.message.rows, pending.message.cols,
                                    tensor::name_of(pending.message.dtype), message.rows, message.cols,
                                    tensor::name_of(message.dtype)));
  }
  wait(pending, what);
  const auto data = std::get<tensor::Matrix<T>>(pending.data);
  if (staged_) {
    // Ordered before every later kernel on the instance; the fence lets the
    // host buffer go back to the pool.
    Kokkos::deep_copy(space_, data, host_view<T>(pending.staging, message.rows, message.cols));
    space_.fence();
  }
  return parts_ == 1 ? data : gather<T>(pending, whole);
}

template <class T>
tensor::Matrix<T> Transport::gather(const Pending& part, const Message& message) {
  const auto whole = buffers_.take<T>(message.rows, message.cols);
  const int count = part.message.rows * part.message.cols;
  bytes_gathered_ += static_cast<std::uint64_t>(count) * sizeof(T);
  // The parts in rank order are the message's elements in order: a plain all-gather.
  if (staged_) {
    const HostBytes host = staging_buffers_.take(bytes_of(message));
    MPI_Allgather(part.staging.data(), count, mpi_type<T>(), host.data(), count, mpi_type<T>(), scatter_group_);
    Kokkos::deep_copy(space_, whole, host_view<T>(host, message.rows, message.cols));
    space_.fence();
  } else {
    MPI_Allgather(std::get<tensor::Matrix<T>>(part.data).data(), count, mpi_type<T>(), whole.data(), count,
                  mpi_type<T>(), scatter_group_);
  }
  return whole;
}

template <class T>
void Transport::send(const Message& whole, const tensor::Matrix<T>& data) {
  const Message message = part_of(whole);
  if (message.dtype != tensor::dtype_of<T>()) {
    throw runtime_error(fmt::format("message tag {} to rank {} is {}, but a {} matrix was given", message.tag,
                                    message.peer, tensor::name_of(message.dtype),
                                    tensor::name_of(tensor::dtype_of<T>())));
  }
  tensor::Matrix<T> source = data;
  if (parts_ > 1) {
    // This rank's part, the elements [part·n, (part+1)·n) of the whole.
    const tensor::Matrix<T> mine(data.data() + static_cast<std::size_t>(part_) * message.rows * message.cols,
                                 message.rows, message.cols);
    source = send_parts_.take<T>(message.rows, message.cols);
    Kokkos::deep_copy(space_, source, mine);
  }
  Pending pending{message, MPI_REQUEST_NULL, source, {}};
  const void* bytes = source.data();
  if (staged_) {
    pending.staging = staging_buffers_.take(bytes_of(message));
    Kokkos::deep_copy(space_, host_view<T>(pending.staging, message.rows, message.cols), source);
    bytes = pending.staging.data();
  }
  // Kernels writing `data` may still run on the instance; only they are waited for.
  space_.fence();
  MPI_Isend(bytes, message.rows * message.cols, mpi_type<T>(), message.peer, message.tag, comm_, &pending.request);
  bytes_sent_ += bytes_of(message);
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

void Transport::complete_sends(const std::string& what) {
  for (auto& pending : sends_) {
    wait(pending, [&] {
      return fmt::format("{} (send of tag {} to rank {})", what, pending.message.tag, pending.message.peer);
    });
  }
  sends_.clear();
}

#define KPIPE_INSTANTIATE(T)                                                                             \
  template tensor::Matrix<T> Transport::complete_receive<T>(const Message&, FunctionRef<std::string()>); \
  template void Transport::send<T>(const Message&, const tensor::Matrix<T>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
KPIPE_INSTANTIATE(tensor::BFloat16)
KPIPE_INSTANTIATE(tensor::Half)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::comm
