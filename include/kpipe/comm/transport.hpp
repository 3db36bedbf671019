#pragma once
// Point-to-point transfers of boundary activations and gradients between
// pipeline ranks (DESIGN.md §4): nonblocking MPI_Isend/MPI_Irecv, receives
// posted ahead of need, buffers reused from a pool, every wait under the
// watchdog. When MPI cannot read the memory space of our Views (CUDA without
// a CUDA-aware MPI), messages are staged through host buffers.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "kpipe/comm/watchdog.hpp"
#include "kpipe/core/function_ref.hpp"
#include "kpipe/tensor/buffer_pool.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::comm {

// One message of a schedule: a rows x cols matrix of `dtype` to or from
// `peer` with `tag`. Boundaries travel in the element type their stages keep
// them in: float32 (float64 in double builds), or bfloat16 and float16 under
// compute.precision = bf16 and fp16, half the bytes.
struct Message {
  int peer = 0;
  int tag = 0;
  int rows = 0;
  int cols = 0;
  tensor::DType dtype = tensor::DType::float32;
};

enum class Staging {
  automatic,  // stage only when MPI cannot access the Views' memory directly
  host,       // always copy through host buffers (the path a non-CUDA-aware MPI needs)
};

// True when this MPI can read and write the default memory space directly:
// always for host memory, for CUDA only with a CUDA-aware MPI (checked at run time).
bool mpi_reaches_device_memory();

class Transport {
 public:
  // `space` is the execution-space instance (a CUDA stream) whose kernels
  // write the data this transport sends: a send waits for that instance
  // only, never for the whole device. With a `scatter_group` of t > 1 ranks
  // (a tensor-parallel group, whose ranks all hold the same boundary tensors),
  // Megatron-LM's scatter/gather: rank r of the group sends only part r of
  // every message (the r-th 1/t of its elements, in row-major order) to its
  // counterpart, and a receive all-gathers the parts in its own group; every
  // rank still sees whole messages. Message widths must divide by t. The
  // default, this rank alone, sends whole messages.
  Transport(MPI_Comm comm, const Watchdog& watchdog, Staging staging = Staging::automatic,
            const tensor::ExecutionSpace& space = tensor::ExecutionSpace(), MPI_Comm scatter_group = MPI_COMM_SELF);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  bool staged() const { return staged_; }

  // Starts receiving `message` now, ahead of the action that needs it.
  void post_receive(const Message& message);
  int posted_receives() const { return static_cast<int>(receives_.size()); }
  // Completes a posted receive and hands its data over, a matrix of T, the
  // message's dtype; `what` names the action and message for the watchdog,
  // built only if it fires.
  template <class T>
  tensor::Matrix<T> complete_receive(const Message& message, FunctionRef<std::string()> what);

  // Starts sending `data` (of the message's dtype), which is kept alive until
  // the send completes; the caller must not write to it before complete_sends().
  template <class T>
  void send(const Message& message, const tensor::Matrix<T>& data);
  // Waits for every send started so far (the end of a step).
  void complete_sends(const std::string& what);

  // Bytes and messages this rank sent (its parts only, with scatter/gather).
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t messages_sent() const { return messages_sent_; }
  // Scatter/gather: the bytes of its received parts this rank contributed to
  // its tensor group's all-gathers (one per received message).
  std::uint64_t bytes_gathered() const { return bytes_gathered_; }
  // The most receives that were posted and not yet completed at one time.
  int peak_posted_receives() const { return peak_posted_; }

 private:
  // A pooled device matrix of any element type a message may have.
  using Buffer = std::variant<tensor::Matrix<float>, tensor::Matrix<double>, tensor::Matrix<tensor::BFloat16>,
                              tensor::Matrix<tensor::Half>>;
  using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace>;

  // Pools of device matrices, one per element type.
  class Pools {
   public:
    explicit Pools(const std::string& label);
    template <class T>
    tensor::Matrix<T> take(int rows, int cols) {
      return std::get<tensor::BufferPool<tensor::Matrix<T>>>(pools_).take(rows, cols);
    }

   private:
    std::tuple<tensor::BufferPool<tensor::Matrix<float>>, tensor::BufferPool<tensor::Matrix<double>>,
               tensor::BufferPool<tensor::Matrix<tensor::BFloat16>>, tensor::BufferPool<tensor::Matrix<tensor::Half>>>
        pools_;
  };

  struct Pending {
    Message message;
    MPI_Request request = MPI_REQUEST_NULL;
    Buffer data;
    HostBytes staging;
  };

  void wait(Pending& pending, FunctionRef<std::string()> what);
  // What this rank sends or receives of `message`: all of it, or with
  // scatter/gather its part, rows x cols/t.
  Message part_of(const Message& message) const;
  // The whole message from this rank's received part: the group's parts
  // gathered in rank order.
  template <class T>
  tensor::Matrix<T> gather(const Pending& part, const Message& message);
  // The posted receive of `message`, or receives_.end().
  std::vector<Pending>::iterator find_receive(const Message& message);

  MPI_Comm comm_;
  const Watchdog& watchdog_;
  tensor::ExecutionSpace space_;
  bool staged_;
  MPI_Comm scatter_group_;
  int parts_ = 1;  // ranks of the scatter group; 1 sends whole messages
  int part_ = 0;   // this rank's part
  std::vector<Pending> receives_;
  std::vector<Pending> sends_;
  Pools buffers_{"kpipe::comm::receive_buffer"};
  Pools send_parts_{"kpipe::comm::send_part"};  // scatter/gather: this rank's parts
  tensor::BufferPool<HostBytes> staging_buffers_{"kpipe::comm::staging_buffer"};
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t messages_sent_ = 0;
  std::uint64_t bytes_gathered_ = 0;
  int peak_posted_ = 0;
};

}  // namespace kpipe::comm
