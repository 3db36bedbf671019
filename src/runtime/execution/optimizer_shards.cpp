#include "kpipe/runtime/execution/optimizer_shards.hpp"

#include "kpipe/model/training/optimizer.hpp"

namespace kpipe::runtime {

template <class Scalar>
ShardGather<Scalar>::ShardGather(comm::Communicator replicas, std::vector<model::Parameter<Scalar>> parameters,
                                 bool stage_through_host, tensor::ExecContext& exec)
    : replicas_(replicas), parameters_(std::move(parameters)), stage_through_host_(stage_through_host), exec_(exec) {
  const int count = comm::size_of(replicas_);
  const auto shards = model::shard_rows(parameters_, count);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    std::vector<int> first;
    for (int r = 0; r < count; ++r) first.push_back(shards[static_cast<std::size_t>(r)][i].begin);
    first.push_back(parameters_[i].value.extent_int(0));
    first_.push_back(std::move(first));
  }
}

template <class Scalar>
void ShardGather<Scalar>::gather_rows(const tensor::Matrix<Scalar>& matrix, std::size_t parameter) {
  exec_.space().fence();  // the update's kernels wrote this rank's rows
  const auto columns = static_cast<std::int64_t>(matrix.extent(1));
  if (!stage_through_host_) {
    comm::all_gather_rows(replicas_, matrix.data(), columns, first_[parameter]);
    return;
  }
  const auto host = Kokkos::create_mirror_view(matrix);
  Kokkos::deep_copy(exec_.space(), host, matrix);
  exec_.space().fence();  // MPI reads the host copy
  comm::all_gather_rows(replicas_, host.data(), columns, first_[parameter]);
  Kokkos::deep_copy(exec_.space(), matrix, host);
  exec_.space().fence();  // the host copy goes out of scope
}

template <class Scalar>
void ShardGather<Scalar>::gather() {
  const auto region = exec_.region("kpipe::runtime::optimizer_shard_gather");
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    gather_rows(parameters_[i].value, i);
    bytes_gathered_ += parameters_[i].value.size() * sizeof(Scalar);
  }
}

template <class Scalar>
tensor::Matrix<Scalar> ShardGather<Scalar>::whole(const tensor::ConstMatrix<Scalar>& mine, std::size_t parameter) {
  const std::vector<int>& first = first_.at(parameter);
  const int rank = comm::rank_of(replicas_);
  auto all = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::optimizer_state_whole", first.back(),
                                                  static_cast<int>(mine.extent(1)));
  const model::RowRange rows{first[static_cast<std::size_t>(rank)], first[static_cast<std::size_t>(rank) + 1]};
  Kokkos::deep_copy(exec_.space(), rows.of(all), mine);
  gather_rows(all, parameter);
  return all;
}

template class ShardGather<float>;
template class ShardGather<double>;

}  // namespace kpipe::runtime
