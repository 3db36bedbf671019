#pragma once
// The end of a training step before the optimizer: data-parallel gradient
// sums across replicas, the sum of a tied matrix's two gradients (its owner
// on the first stage, its copy on the last: model.tie_embeddings), then the
// global gradient norm for clipping and the NaN/Inf check, summed in global
// layer order on every rank, so that all ranks (and the sequential
// reference) agree on the clip factor bitwise. The sums of a layer may start
// as soon as its gradient is final (pipeline.overlap_grad_reduce), while the
// rest of the backward pass and the cool-down run.

#include <memory>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/gradient_reducer.hpp"
#include "kpipe/comm/pair_sum.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

template <class Scalar>
class GradientSync {
 public:
  // `chunks[c]` is the model stage the schedule's placement puts at (this rank, c).
  GradientSync(const comm::ProcessGrid& grid, const schedule::Schedule& schedule,
               const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks, bool stage_through_host,
               const comm::Watchdog& watchdog, tensor::ExecContext& exec);

  // Starts summing the gradients of layer `layer` of chunk `chunk` (counted
  // from the chunk's first) across the replicas: they are final for this step.
  void start(int chunk, int layer);
  // Advances the sums in flight (between actions).
  void progress();
  // Sums the gradients of every replica of this rank's chunks, in place:
  // starts what start() did not, then waits for all; then sums the tied
  // gradients (model::sum_tied_gradients), with the other rank where one
  // end of the tie is here and the other elsewhere.
  void reduce();
  // The global L2 norm of this step's gradients (collective over the
  // pipeline group): squared_norms() of every rank, gathered and added.
  double global_norm();
  // This rank's part of it: the squared norms of its gradients as of the
  // whole parameters, its chunks in order (collective over the tensor group).
  std::vector<double> squared_norms();
  // How many squared norms each pipeline rank gives, rank after rank: fixed
  // by the partition, gathered at the first call (collective then).
  const std::vector<int>& norm_counts();
  // The global L2 norm from every pipeline rank's squared_norms(), rank after
  // rank, added in global layer order as the sequential reference adds them.
  double global_norm(const std::vector<double>& by_rank) const;
  // Bytes of this rank's gradients summed across the replicas so far.
  std::uint64_t bytes_summed() const { return reducer_.bytes_summed(); }
  // Bytes of this rank's tied gradient summed with the other end so far.
  std::uint64_t tied_bytes_summed() const { return tied_sum_ ? tied_sum_->bytes_summed() : 0; }

 private:
  const comm::ProcessGrid& grid_;
  const schedule::Schedule& schedule_;
  const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks_;
  comm::GradientReducer<Scalar> reducer_;
  // This rank's ends of the tied matrix (model.tie_embeddings); where it holds
  // one, the two ranks of its (tensor rank, replica) that hold one end each,
  // and the sum between them (empty elsewhere).
  std::vector<model::Parameter<Scalar>> tied_;
  comm::SubCommunicator tied_group_;
  std::unique_ptr<comm::PairSum<Scalar>> tied_sum_;
  std::vector<std::vector<bool>> started_;  // [chunk][layer]: summing since start() in this step
  tensor::ExecContext& exec_;
  // How many norms every (rank, chunk) has, [rank · v + chunk], and every
  // rank: gathered at the first norm (a step every rank is in, unlike set-up,
  // which may end early on one rank).
  std::vector<int> chunk_norm_counts_;
  std::vector<int> rank_norm_counts_;
};

}  // namespace kpipe::runtime
