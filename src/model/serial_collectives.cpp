#include "kpipe/model/collectives.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"

namespace kpipe::model {

namespace {
// `to` = `from` when both have the same shape (one rank's gather or reduce-scatter).
void copy_same_shape(const tensor::ExecContext& exec, const char* what, const tensor::Tensor& from,
                     const tensor::Tensor& to) {
  if (from.spec() != to.spec()) {
    throw runtime_error(fmt::format("{} of {} into {}: with one rank both must be the same shape", what,
                                    from.spec().to_string(), to.spec().to_string()));
  }
  using Bytes = Kokkos::View<unsigned char*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const auto count = from.spec().bytes();
  Kokkos::deep_copy(exec.space(), Bytes(static_cast<unsigned char*>(to.data()), count),
                    Bytes(static_cast<unsigned char*>(from.data()), count));
}
}  // namespace

void SerialCollectives::all_gather(Group, const tensor::Tensor& local, const tensor::Tensor& gathered) {
  copy_same_shape(exec_, "all_gather", local, gathered);
}

void SerialCollectives::reduce_scatter_sum(Group, const tensor::Tensor& whole, const tensor::Tensor& local) {
  copy_same_shape(exec_, "reduce_scatter_sum", whole, local);
}

}  // namespace kpipe::model
