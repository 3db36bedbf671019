#pragma once
// The MPI process grid (DESIGN.md §4): world = p · d ranks, one communicator
// per pipeline (p ranks; a rank's pipeline rank holds its model chunks) and one per data-parallel
// group (d ranks of the same pipeline rank). World rank = replica · p + pipeline rank, so
// the ranks of one pipeline are neighbours, usually on the same node.

#include <mpi.h>

#include <string>

namespace kpipe::comm {

class ProcessGrid {
 public:
  // Throws an input error, before any compute, when the world size is not p · d.
  ProcessGrid(MPI_Comm world, int stages, int data_parallel);
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  int pipeline_size() const { return stages_; }
  int replicas() const { return replicas_; }
  int pipeline_rank() const { return pipeline_rank_; }  // rank in the pipeline communicator
  int replica() const { return replica_; }              // rank in the data-parallel communicator
  int world_rank() const { return world_rank_; }

  MPI_Comm world() const { return world_; }
  MPI_Comm pipeline() const { return pipeline_; }
  MPI_Comm data() const { return data_; }

  // "world 4 = 2 pipelines x 2 stages" and one line per pipeline listing its ranks.
  std::string layout() const;

 private:
  MPI_Comm world_;
  MPI_Comm pipeline_ = MPI_COMM_NULL;
  MPI_Comm data_ = MPI_COMM_NULL;
  int stages_;
  int replicas_;
  int world_rank_ = 0;
  int pipeline_rank_ = 0;
  int replica_ = 0;
};

}  // namespace kpipe::comm
