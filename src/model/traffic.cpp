#include "kpipe/model/traffic.hpp"

#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/training/trainer.hpp"

namespace kpipe::model {

namespace {

constexpr std::int64_t scalar_bytes = sizeof(float);

LinkVolume bytes_of(const LinkVolume& elements) { return {elements.bytes * scalar_bytes, elements.calls}; }

}  // namespace

std::vector<StageTraffic> stage_traffic(const config::RunConfig& config, const std::vector<LayerRange>& ranges) {
  const ModelSpec model = ModelSpec::from_config(config.model);
  const auto specs = model.layers();
  const int t = config.pipeline.tensor_parallel;
  const int parts = boundary_parts(config.pipeline);
  const std::int64_t rows = config.train.microbatch_size;
  const bool recompute = config.pipeline.recompute == config::Recompute::full;
  const bool sequence_parallel = t > 1 && config.pipeline.sequence_parallel;
  const bool vocab_parallel_loss = t > 1 && model.token_sequences();
  // Boundaries travel in the type stages keep them in (model::Stage::boundary_dtype).
  const auto boundary_bytes =
      static_cast<std::int64_t>(tensor::size_of(kernels::stored_dtype<float>(kernel_choice(config.compute).precision)));
  FootprintQuery query;
  query.rows = config.train.microbatch_size;
  query.tensor_ranks = t;
  query.sequence_parallel = sequence_parallel;
  std::vector<StageTraffic> stages(ranges.size());
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    const LayerRange range = ranges[s];
    StageTraffic& stage = stages[s];
    const bool first = s == 0, last = s + 1 == ranges.size();
    const LayerFootprint layers = layers_footprint(model, range, query);
    stage.gradient_bytes = layers.parameters * scalar_bytes;
    if (config.optimizer.distributed) stage.gathered_bytes = stage.gradient_bytes;
    // The tied matrix's ends: the token table in the first stage, its copy in the last.
    if (model.tie_embeddings && first != last) {
      stage.tied_bytes = std::int64_t{model.padded_vocab(t)} / t * model.dim * scalar_bytes;
    }
    LinkVolume forward = layers.tensor_forward, backward = layers.tensor_backward;
    // Recomputation runs the layers' F again in B; the loss is not recomputed.
    if (recompute) backward += forward;
    // The vocabulary-parallel cross-entropy sums each position's shard maxima (t of them) and its two sums.
    if (vocab_parallel_loss && last) forward += LinkVolume{rows * model.context * (t + 2), 2};
    stage.tensor_forward = bytes_of(forward);
    stage.tensor_backward = bytes_of(backward);
    stage.tensor_step = bytes_of(layers.row_partial);
    // A sequence-parallel MLP gathers its output rows for the loss (again when recomputing).
    if (sequence_parallel && last && !model.token_sequences()) {
      const LinkVolume gather{rows / t * specs[range.end() - 1].output_dim * scalar_bytes, 1};
      stage.tensor_forward += gather;
      if (recompute) stage.tensor_backward += gather;
    }

    const std::int64_t input_bytes = first ? 0 : stages[s - 1].output_bytes;
    stage.output_bytes = last ? 0 : rows * specs[range.end() - 1].output_dim * boundary_bytes;
    stage.output_share_bytes = stage.output_bytes / parts;
    // A message each way per boundary: the activation out, the gradient back.
    const LinkVolume sent{stage.output_bytes / parts + input_bytes / parts, (last ? 0 : 1) + (first ? 0 : 1)};
    stage.pipeline = sent;
    // A receive all-gathers the parts: each rank contributes what its counterpart sent it.
    if (boundary_gathered(config.pipeline)) stage.boundary_gather = sent;
  }
  return stages;
}

StepTraffic step_traffic(const std::vector<const StageTraffic*>& stages, int microbatches, int data_parallel) {
  StepTraffic step;
  // One end of the tied matrix here and the other on another rank: one sum of its gradient.
  int tied_ends = 0;
  for (const StageTraffic* stage : stages) tied_ends += stage->tied_bytes > 0 ? 1 : 0;
  for (const StageTraffic* stage : stages) {
    if (tied_ends == 1) step.tied += LinkVolume{stage->tied_bytes, stage->tied_bytes > 0 ? 1 : 0};
    step.pipeline += stage->pipeline.times(microbatches);
    step.tensor += stage->tensor_forward.times(microbatches);
    step.tensor += stage->tensor_backward.times(microbatches);
    step.tensor += stage->boundary_gather.times(microbatches);
    step.tensor += stage->tensor_step;
    if (data_parallel > 1) {
      step.data += LinkVolume{stage->gradient_bytes, 1};
      step.data += LinkVolume{stage->gathered_bytes, stage->gathered_bytes > 0 ? 1 : 0};
    }
  }
  return step;
}

}  // namespace kpipe::model
