#pragma once
// What one rank of a model stage sends, per link, from its layers' own
// footprints (layer_kind.hpp) (docs/runtime.md, "Communication volume"): `kpipe plan` prints it per
// training step, the simulator charges it, and `kpipe run` prints it next to
// the bytes its ranks counted. Bytes are what a rank sends or contributes to
// a collective (its buffer once, however the collective moves it).

#include <cstdint>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/footprint.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

// One rank of one model stage (p·v of them, in model order).
struct StageTraffic {
  std::int64_t output_bytes = 0;        // the whole boundary tensor after the stage, per microbatch; 0 for the last
  std::int64_t output_share_bytes = 0;  // one message across that boundary: output_bytes over its parts
  // Per microbatch: the boundary activation sent in F and gradient sent in B
  // (1/t of the whole with scatter/gather), and the tensor group's sums in F
  // (layers and loss) and B (recomputation repeats F's), with the
  // scatter/gather all-gathers of what the stage receives.
  LinkVolume pipeline;
  LinkVolume tensor_forward;
  LinkVolume tensor_backward;
  LinkVolume boundary_gather;
  // Once per step: with sequence parallelism, the sums of the gradients that
  // each rank computed from its rows only (LayerNorms, unpaired Linears).
  LinkVolume tensor_step;
  std::int64_t gradient_bytes = 0;  // the rank's parameter shard's gradients: one data-parallel sum per step
  // train.distributed_optimizer: the updated parameters all-gathered over
  // the replicas once a step, counted whole as a collective's buffer.
  std::int64_t gathered_bytes = 0;
  // model.tie_embeddings: the first and the last stage's shard of the tied
  // matrix, whose gradient the two sum once per step (0 elsewhere).
  std::int64_t tied_bytes = 0;
};

// One rank's volume per training step, per link.
struct StepTraffic {
  LinkVolume pipeline;  // boundary activations and gradients to the neighbour stages
  LinkVolume tensor;    // tensor-group collectives, the boundary all-gathers included
  LinkVolume data;      // data-parallel gradient sums (none when d = 1)
  LinkVolume tied;      // the tied matrix's gradient sum between the first and last stage's ranks
};

// The shares a boundary tensor travels in: t with scatter/gather or sequence
// parallelism (whose boundaries hold each rank's rows), else 1.
inline int boundary_parts(const config::PipelineConfig& pipeline) {
  return pipeline.scatter_gather || pipeline.sequence_parallel ? pipeline.tensor_parallel : 1;
}

// Whether a receiving stage all-gathers the parts of a boundary tensor:
// scatter/gather does; sequence parallelism keeps each rank's rows.
inline bool boundary_gathered(const config::PipelineConfig& pipeline) {
  return pipeline.tensor_parallel > 1 && pipeline.scatter_gather && !pipeline.sequence_parallel;
}

// The traffic of every model stage of a run partitioned as `partition` (the
// run's TrainerSpec::stages): t, pipeline.scatter_gather,
// pipeline.sequence_parallel and recomputation, float32 tensors of
// train.microbatch_size samples.
std::vector<StageTraffic> stage_traffic(const config::RunConfig& config, const std::vector<LayerRange>& partition);

// A rank's volume per step from its model stages' traffic: m microbatches
// through each, the gradient sums (and a distributed optimizer's gather)
// once when d > 1, and the tied matrix's sum
// once where the rank holds one of its two ends.
StepTraffic step_traffic(const std::vector<const StageTraffic*>& stages, int microbatches, int data_parallel);

}  // namespace kpipe::model
