#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::tensor {

namespace {
template <class Pools>
void tally(const Pools& pools, std::size_t& buffers, std::size_t& bytes) {
  for (const auto& entry : pools) {
    buffers += entry.second.size();
    bytes += entry.second.bytes();
  }
}
}  // namespace

const std::vector<ExecutionSpace>& ExecContext::thread_instances(int count) {
  while (static_cast<int>(thread_instances_.size()) < count) {
    thread_instances_.push_back(compat::calling_thread_instance<ExecutionSpace>());
  }
  return thread_instances_;
}

Tensor Workspace::take(std::string_view label, DType dtype, int rows, int cols) {
  return with_element_type(dtype, [&](auto type) { return Tensor(take<decltype(type)>(label, rows, cols)); });
}

std::size_t Workspace::buffers() const {
  std::size_t buffers = 0, bytes = 0;
  tally(float_pools_, buffers, bytes);
  tally(double_pools_, buffers, bytes);
  tally(bfloat16_pools_, buffers, bytes);
  tally(float16_pools_, buffers, bytes);
  return buffers;
}

std::size_t Workspace::bytes() const {
  std::size_t buffers = 0, bytes = 0;
  tally(float_pools_, buffers, bytes);
  tally(double_pools_, buffers, bytes);
  tally(bfloat16_pools_, buffers, bytes);
  tally(float16_pools_, buffers, bytes);
  return bytes;
}

ExecContext::ExecContext() : space_() {}

ExecContext::ExecContext(const ExecutionSpace& space) : space_(space) {}

}  // namespace kpipe::tensor
