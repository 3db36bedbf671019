#pragma once
// Where and with what the compute of one pipeline rank runs (DESIGN.md §3):
// the execution-space instance every kernel is launched on (on CUDA a stream,
// so transfers and compute of different microbatches can overlap), a pool of
// per-microbatch buffers, and named profiling regions. Layers, stages, losses
// and trainers hold a reference to one; nothing below constructs a default
// execution space of its own.

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/tensor/buffer_pool.hpp"
#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"
#include "kpipe/tensor/tensor.hpp"

namespace kpipe::tensor {

// Pooled device matrices, one BufferPool per (scalar type, label). After the
// first step every take() finds a free buffer of its shape, so the steady
// state allocates nothing. A buffer is free again once its last handle
// outside the pool is dropped: for a stashed tensor when the microbatch's W
// (or BW) clears its saved tensors, for a temporary at the end of the call
// that took it. That is safe without a fence because every kernel runs on the
// context's one in-order instance (see buffer_pool.hpp).
class Workspace {
 public:
  // The label is looked up as it is given (a string literal, mostly): no
  // std::string is made but for a label's first buffer.
  template <class Scalar>
  Matrix<Scalar> take(std::string_view label, int rows, int cols) {
    auto& by_label = pools<Scalar>();
    auto it = by_label.find(label);
    if (it == by_label.end()) it = by_label.emplace(label, BufferPool<Matrix<Scalar>>(std::string(label))).first;
    return it->second.take(rows, cols);
  }

  // The same for a rows x cols matrix of `dtype`, as a Tensor: for buffers
  // whose element type is known only at run time (a saved tensor's).
  Tensor take(std::string_view label, DType dtype, int rows, int cols);

  // Buffers and bytes allocated so far, free or not.
  std::size_t buffers() const;
  std::size_t bytes() const;

 private:
  // Pools by label; std::less<> finds a std::string_view without making a string.
  template <class Scalar>
  using Pools = std::map<std::string, BufferPool<Matrix<Scalar>>, std::less<>>;

  template <class Scalar>
  Pools<Scalar>& pools();

  Pools<float> float_pools_;
  Pools<double> double_pools_;
  Pools<BFloat16> bfloat16_pools_;  // compute.precision = bf16 operands
  Pools<Half> float16_pools_;       // compute.precision = fp16 operands
};

template <>
inline Workspace::Pools<float>& Workspace::pools<float>() {
  return float_pools_;
}
template <>
inline Workspace::Pools<double>& Workspace::pools<double>() {
  return double_pools_;
}
template <>
inline Workspace::Pools<BFloat16>& Workspace::pools<BFloat16>() {
  return bfloat16_pools_;
}
template <>
inline Workspace::Pools<Half>& Workspace::pools<Half>() {
  return float16_pools_;
}

class ExecContext {
 public:
  // The default instance of the default execution space.
  ExecContext();
  // A caller-given instance: on CUDA, e.g. Kokkos::Cuda(stream).
  explicit ExecContext(const ExecutionSpace& space);
  // Layers and stages keep references to a context (and to its pool).
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  const ExecutionSpace& space() const { return space_; }
  Workspace& pool() { return pool_; }
  const Workspace& pool() const { return pool_; }

  // A profiling region until the returned object goes out of scope:
  //   const auto region = ctx.region("kpipe::model::linear::forward");
  compat::ScopedRegion region(const std::string& name) const { return compat::ScopedRegion(name); }

  // Waits for this instance only; other streams and the host keep running.
  void fence(const std::string& why = "kpipe::tensor::ExecContext::fence") const { compat::fence(space_, why); }

  // `count` instances for as many threads of a host parallel region to launch
  // kernels on at once (compat::calling_thread_instance), made on first use
  // and kept: host builds only.
  const std::vector<ExecutionSpace>& thread_instances(int count);

 private:
  ExecutionSpace space_;
  Workspace pool_;
  std::vector<ExecutionSpace> thread_instances_;
};

}  // namespace kpipe::tensor
