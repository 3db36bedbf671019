#include "kpipe/comm/process_grid.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"

namespace kpipe::comm {

ProcessGrid::ProcessGrid(MPI_Comm world, int stages, int data_parallel)
    : world_(world), stages_(stages), replicas_(data_parallel) {
  int size = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &world_rank_);
  if (size != stages * data_parallel) {
    throw input_error(
        fmt::format("the job has {} MPI rank{}, but pipeline.stages * pipeline.data_parallel = {} * {} "
                    "= {}; launch with mpirun -n {} or change the deck",
                    size, size == 1 ? "" : "s", stages, data_parallel, stages * data_parallel, stages * data_parallel));
  }
  pipeline_rank_ = world_rank_ % stages;
  replica_ = world_rank_ / stages;
  MPI_Comm_split(world, replica_, pipeline_rank_, &pipeline_);
  MPI_Comm_split(world, pipeline_rank_, replica_, &data_);
}

ProcessGrid::~ProcessGrid() {
  MPI_Comm_free(&pipeline_);
  MPI_Comm_free(&data_);
}

std::string ProcessGrid::layout() const {
  std::string text = fmt::format("process grid: world {} = {} pipeline{} x {} stage{}", stages_ * replicas_, replicas_,
                                 replicas_ == 1 ? "" : "s", stages_, stages_ == 1 ? "" : "s");
  for (int replica = 0; replica < replicas_; ++replica) {
    text += fmt::format("\n  pipeline {}: world ranks {}..{} hold stages 0..{}", replica, replica * stages_,
                        (replica + 1) * stages_ - 1, stages_ - 1);
  }
  return text;
}

}  // namespace kpipe::comm
