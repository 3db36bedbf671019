#include "kpipe/runtime/grid_collectives.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::runtime {

namespace {

using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using DeviceBytes = Kokkos::View<unsigned char*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

std::vector<unsigned char> to_host(const tensor::ExecContext& exec, const tensor::Tensor& tensor) {
  std::vector<unsigned char> bytes(tensor.spec().bytes());
  Kokkos::deep_copy(exec.space(), HostBytes(bytes.data(), bytes.size()),
                    DeviceBytes(static_cast<unsigned char*>(tensor.data()), bytes.size()));
  exec.space().fence();
  return bytes;
}

void from_host(const tensor::ExecContext& exec, const std::vector<unsigned char>& bytes, const tensor::Tensor& tensor) {
  Kokkos::deep_copy(exec.space(), DeviceBytes(static_cast<unsigned char*>(tensor.data()), bytes.size()),
                    HostBytes(const_cast<unsigned char*>(bytes.data()), bytes.size()));
  exec.space().fence();
}

// `ranks` equal blocks of Scalars, added in rank order into the first.
template <class Scalar>
void sum_blocks_in_rank_order(std::vector<unsigned char>& all, std::size_t block_bytes, int ranks) {
  const std::size_t count = block_bytes / sizeof(Scalar);
  std::vector<Scalar> total(count), block(count);
  std::memcpy(total.data(), all.data(), block_bytes);
  for (int r = 1; r < ranks; ++r) {
    std::memcpy(block.data(), all.data() + r * block_bytes, block_bytes);
    for (std::size_t i = 0; i < count; ++i) total[i] += block[i];
  }
  all.resize(block_bytes);
  std::memcpy(all.data(), total.data(), block_bytes);
}

}  // namespace

comm::Communicator GridCollectives::communicator(model::Group group) const {
  return group == model::Group::tensor ? grid_.tensor() : grid_.data();
}

int GridCollectives::size(model::Group group) const { return comm::size_of(communicator(group)); }

int GridCollectives::rank(model::Group group) const { return comm::rank_of(communicator(group)); }

void GridCollectives::count(const tensor::Tensor& contribution) {
  bytes_contributed_ += contribution.spec().bytes();
  ++collectives_;
}

void GridCollectives::all_reduce_sum(model::Group group, const tensor::Tensor& buffer) {
  const int ranks = size(group);
  if (ranks == 1) return;
  count(buffer);
  std::vector<unsigned char> all = comm::all_gather(communicator(group), to_host(exec_, buffer));
  switch (buffer.spec().dtype()) {
    case tensor::DType::float32:
      sum_blocks_in_rank_order<float>(all, buffer.spec().bytes(), ranks);
      break;
    case tensor::DType::float64:
      sum_blocks_in_rank_order<double>(all, buffer.spec().bytes(), ranks);
      break;
    default:
      throw runtime_error(
          fmt::format("all_reduce_sum of {}: only float32 and float64 buffers are summed", buffer.spec().to_string()));
  }
  from_host(exec_, all, buffer);
}

void GridCollectives::all_gather(model::Group group, const tensor::Tensor& local, const tensor::Tensor& gathered) {
  const int ranks = size(group);
  if (gathered.spec().bytes() != local.spec().bytes() * static_cast<std::size_t>(ranks) ||
      gathered.spec().dtype() != local.spec().dtype()) {
    throw runtime_error(fmt::format("all_gather of {} from {} ranks into {}: the gathered tensor must hold {} of it",
                                    local.spec().to_string(), ranks, gathered.spec().to_string(), ranks));
  }
  if (ranks > 1) count(local);
  from_host(exec_, comm::all_gather(communicator(group), to_host(exec_, local)), gathered);
}

void GridCollectives::reduce_scatter_sum(model::Group group, const tensor::Tensor& whole, const tensor::Tensor& local) {
  const auto ranks = static_cast<std::size_t>(size(group));
  if (whole.spec().bytes() != local.spec().bytes() * ranks || whole.spec().dtype() != local.spec().dtype()) {
    throw runtime_error(
        fmt::format("reduce_scatter_sum of {} over {} ranks into {}: each rank's rows must be 1/{} of it",
                    whole.spec().to_string(), ranks, local.spec().to_string(), ranks));
  }
  // The whole rank-order sum, then this rank's rows: bitwise those rows of all_reduce_sum.
  all_reduce_sum(group, whole);
  using Bytes = Kokkos::View<unsigned char*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::size_t count = local.spec().bytes();
  const auto first = static_cast<std::size_t>(rank(group)) * count;
  Kokkos::deep_copy(exec_.space(), Bytes(static_cast<unsigned char*>(local.data()), count),
                    Bytes(static_cast<unsigned char*>(whole.data()) + first, count));
}

}  // namespace kpipe::runtime
