#include "kpipe/runtime/execution/grid_collectives.hpp"

#include <fmt/format.h>

#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::runtime {

namespace {

using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using DeviceBytes = Kokkos::View<unsigned char*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// MPI reads and writes host memory (the staging rule of comm::Transport).
constexpr bool host_accessible = Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible;

void from_host(const tensor::ExecContext& exec, const unsigned char* bytes, const tensor::Tensor& tensor) {
  const std::size_t n = tensor.spec().bytes();
  Kokkos::deep_copy(exec.space(), DeviceBytes(static_cast<unsigned char*>(tensor.data()), n),
                    HostBytes(const_cast<unsigned char*>(bytes), n));
  exec.space().fence();
}

// `ranks` equal blocks of Scalars, added in rank order into the first.
template <class Scalar>
void sum_blocks_in_rank_order(unsigned char* all, std::size_t block_bytes, int ranks) {
  const std::size_t count = block_bytes / sizeof(Scalar);
  Scalar* total = reinterpret_cast<Scalar*>(all);
  for (int r = 1; r < ranks; ++r) {
    const Scalar* block = reinterpret_cast<const Scalar*>(all + r * block_bytes);
    for (std::size_t i = 0; i < count; ++i) total[i] += block[i];
  }
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

void GridCollectives::gather_to_host(model::Group group, const tensor::Tensor& local) {
  const std::size_t n = local.spec().bytes();
  gathered_.resize(n * static_cast<std::size_t>(size(group)));
  exec_.space().fence();  // the kernels that wrote `local`
  const unsigned char* mine = static_cast<const unsigned char*>(local.data());
  if (!host_accessible) {
    sent_.resize(n);
    Kokkos::deep_copy(exec_.space(), HostBytes(sent_.data(), n),
                      DeviceBytes(static_cast<unsigned char*>(local.data()), n));
    exec_.space().fence();
    mine = sent_.data();
  }
  comm::all_gather(communicator(group), mine, n, gathered_.data());
}

void GridCollectives::all_reduce_sum(model::Group group, const tensor::Tensor& buffer) {
  const int ranks = size(group);
  if (ranks == 1) return;
  count(buffer);
  gather_to_host(group, buffer);
  switch (buffer.spec().dtype()) {
    case tensor::DType::float32:
      sum_blocks_in_rank_order<float>(gathered_.data(), buffer.spec().bytes(), ranks);
      break;
    case tensor::DType::float64:
      sum_blocks_in_rank_order<double>(gathered_.data(), buffer.spec().bytes(), ranks);
      break;
    default:
      throw runtime_error(
          fmt::format("all_reduce_sum of {}: only float32 and float64 buffers are summed", buffer.spec().to_string()));
  }
  from_host(exec_, gathered_.data(), buffer);
}

void GridCollectives::all_gather(model::Group group, const tensor::Tensor& local, const tensor::Tensor& gathered) {
  const int ranks = size(group);
  if (gathered.spec().bytes() != local.spec().bytes() * static_cast<std::size_t>(ranks) ||
      gathered.spec().dtype() != local.spec().dtype()) {
    throw runtime_error(fmt::format("all_gather of {} from {} ranks into {}: the gathered tensor must hold {} of it",
                                    local.spec().to_string(), ranks, gathered.spec().to_string(), ranks));
  }
  if (ranks > 1) count(local);
  gather_to_host(group, local);
  from_host(exec_, gathered_.data(), gathered);
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
