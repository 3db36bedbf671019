#pragma once
// Moving between a parameter's shard (model::Shard) and the whole tensor:
// the slice a tensor-parallel rank holds, and the whole tensor gathered from
// every rank of the group. Initialisation slices the whole initial weight, so
// every t starts from the same model; checkpoints and tests gather.

#include "kpipe/model/collectives.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

// local = the slice `shard` of `whole` (local has the shard's shape), queued
// on the instance.
template <class Scalar>
void copy_shard(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& whole, const Shard& shard,
                const tensor::Matrix<Scalar>& local);

// A padded global tensor of `shard` cut to its first shard.valid entries
// along shard.axis (its leading rows as a view of `whole`, columns as a
// copy), or `whole` itself when not padded. Read it, never write it.
template <class Scalar>
tensor::Matrix<Scalar> without_padding(const tensor::ExecutionSpace& space, const tensor::Matrix<Scalar>& whole,
                                       const Shard& shard);
// local = the slice `shard` of the global tensor whose real entries are
// `real` (its padding, past shard.valid along shard.axis, zero): copy_shard
// of the padded tensor; copy_shard itself when `shard` is not padded.
template <class Scalar>
void copy_real_shard(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& real, const Shard& shard,
                     const tensor::Matrix<Scalar>& local);

// The whole tensor whose shard `shard` this rank holds as `local`, gathered
// from every rank of the tensor group (a copy of local when whole).
// Collective over the tensor group.
template <class Scalar>
tensor::Matrix<Scalar> gather_shards(tensor::ExecContext& exec, Collectives& collectives, const Shard& shard,
                                     const tensor::ConstMatrix<Scalar>& local);

// Sequence parallelism: sums over the tensor group (rank order) the gradients
// of the parameters marked row_partial, which saw only this rank's rows, so
// each holds the whole microbatches' gradient before clipping and the
// optimizer (Megatron's all-reduce of the LayerNorm gradients). Collective
// over the tensor group; nothing to do without such parameters.
template <class Scalar>
void sum_row_partials(Collectives& collectives, const std::vector<Parameter<Scalar>>& parameters);

}  // namespace kpipe::model
