#pragma once
// The MPI process grid (DESIGN.md §4): world = p · t · d ranks, one
// communicator per pipeline (p ranks: the same replica and tensor rank; a
// rank's pipeline rank holds its model chunks), one per tensor-parallel group
// (t ranks sharing one model stage of one replica) and one per data-parallel
// group (d ranks of the same stage and tensor rank). World rank =
// (replica · p + pipeline rank) · t + tensor rank: a tensor group, which talks
// in every layer, is the closest ranks (one node), then a pipeline.

#include <mpi.h>

#include <string>
#include <vector>

namespace kpipe::comm {

// The layout of a p x t x d grid in world ranks, computed without MPI so that
// `kpipe plan` prints what `kpipe run` will: "process grid: world 4 = 2
// pipelines x 2 stages" (x t tensor ranks) and one line per pipeline listing
// its ranks.
std::string grid_layout(int stages, int tensor_parallel, int data_parallel);

// Which world ranks each host holds, given every rank's host name
// (host_names): "hosts: a holds world ranks 0..1, b holds world ranks 2..3";
// "" on one host.
std::string host_layout(const std::vector<std::string>& hosts);

// The first tensor group (t consecutive world ranks) whose ranks sit on more
// than one host, as its first world rank; -1 when every group has one host.
// Tensor groups exchange activations in every layer: they belong on one host.
int first_split_tensor_group(const std::vector<std::string>& hosts, int tensor_parallel);

class ProcessGrid {
 public:
  // Throws an input error, before any compute, when the world size is not p · t · d.
  // p, t, d in the order of grid_layout and of the world size p · t · d.
  ProcessGrid(MPI_Comm world, int stages, int tensor_parallel, int data_parallel);
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  int pipeline_size() const { return stages_; }
  int replicas() const { return replicas_; }
  int pipeline_rank() const { return pipeline_rank_; }  // rank in the pipeline communicator
  int replica() const { return replica_; }              // rank in the data-parallel communicator
  int tensor_size() const { return tensor_size_; }
  int tensor_rank() const { return tensor_rank_; }  // rank in the tensor-parallel communicator
  int world_rank() const { return world_rank_; }

  MPI_Comm world() const { return world_; }
  MPI_Comm pipeline() const { return pipeline_; }
  MPI_Comm data() const { return data_; }
  MPI_Comm tensor() const { return tensor_; }

  // grid_layout of this grid.
  std::string layout() const { return grid_layout(stages_, tensor_size_, replicas_); }
  // Every world rank's host name (host_names, gathered once), and how many
  // ranks share this rank's host.
  const std::vector<std::string>& hosts() const { return hosts_; }
  int ranks_on_node() const;

 private:
  MPI_Comm world_;
  MPI_Comm pipeline_ = MPI_COMM_NULL;
  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm tensor_ = MPI_COMM_NULL;
  int stages_;
  int replicas_;
  int tensor_size_;
  int tensor_rank_ = 0;
  int world_rank_ = 0;
  int pipeline_rank_ = 0;
  int replica_ = 0;
  std::vector<std::string> hosts_;
};

}  // namespace kpipe::comm
