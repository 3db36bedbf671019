#include "kpipe/model/traffic.hpp"

namespace kpipe::model {

namespace {

constexpr std::int64_t scalar_bytes = sizeof(float);

// A Linear in x out on one rank: column-parallel holds out/t of the weight's
// columns and of the bias, row-parallel in/t of the rows and the whole bias.
std::int64_t linear_parameters(std::int64_t in, std::int64_t out, TensorSplit split, int ranks) {
  switch (split) {
    case TensorSplit::column:
      return in * out / ranks + out / ranks;
    case TensorSplit::row:
      return in * out / ranks + out;
    case TensorSplit::none:
      break;
  }
  return in * out + out;
}

// The sums one layer's F and B call in the tensor group, in elements per
// sample (docs/model.md, "Tensor parallelism"): a row-parallel Linear sums its
// output in F, a column-parallel one its input gradient in B (none for the
// model's first layer, whose input has no gradient).
struct LayerSums {
  LinkVolume forward;
  LinkVolume backward;
};

// With sequence parallelism (docs/model.md) the whole regions hold 1/t of the
// rows: a column-parallel Linear all-gathers its input rows in F and again in
// W (it keeps only its own) and reduce-scatters its input gradient in B; a
// row-parallel one reduce-scatters its output in F and all-gathers its output
// gradient in B; the embedding reduce-scatters its lookups. A reduce-scatter
// contributes the whole buffer (it is the rank-order sum, then this rank's
// rows), an all-gather this rank's rows.
LayerSums sequence_parallel_sums(const LayerSpec& layer, TensorSplit split, int t) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  switch (layer.kind) {
    case LayerKind::embedding:
      return {{out, 1}, {out / t, 1}};
    case LayerKind::decoder_block:  // QKV and MLP up column-, the two projections row-parallel
      return {{2 * in / t + 2 * out, 4}, {2 * in + 2 * out / t + 2 * in / t, 6}};
    case LayerKind::lm_head:
      return {{in / t, 1}, {in + in / t, 2}};
    case LayerKind::residual_block:
      return {{in / t + out, 2}, {in + out / t + in / t, 3}};
    case LayerKind::linear:
    case LayerKind::linear_activation:
      if (split == TensorSplit::row) return {{out, 1}, {out / t, 1}};
      // The model's first Linear too: the rows edge before it takes the input gradient.
      if (split == TensorSplit::column) return {{in / t, 1}, {in + in / t, 2}};
      return {};
  }
  return {};
}

// Elements of the gradients a rank computes from its rows only, summed once a step.
std::int64_t row_partial_parameters(const ModelSpec& model, const LayerSpec& layer, TensorSplit split) {
  switch (layer.kind) {
    case LayerKind::decoder_block:  // two LayerNorms
      return 4 * std::int64_t{model.dim};
    case LayerKind::lm_head:
      return 2 * std::int64_t{model.dim};
    case LayerKind::residual_block:
      return 2 * std::int64_t{layer.input_dim};
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return split == TensorSplit::none ? std::int64_t{layer.input_dim} * layer.output_dim + layer.output_dim : 0;
    case LayerKind::embedding:
      return 0;
  }
  return 0;
}

// How many row-partial parameters (one sum each) the layer has.
std::int64_t row_partial_count(const LayerSpec& layer, TensorSplit split) {
  switch (layer.kind) {
    case LayerKind::decoder_block:
      return 4;
    case LayerKind::lm_head:
    case LayerKind::residual_block:
      return 2;
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return split == TensorSplit::none ? 2 : 0;
    case LayerKind::embedding:
      return 0;
  }
  return 0;
}

LayerSums layer_sums(const LayerSpec& layer, TensorSplit split, bool first_layer) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  switch (layer.kind) {
    case LayerKind::embedding:  // the vocabulary shards' lookups
      return {{out, 1}, {}};
    case LayerKind::decoder_block:  // attention and MLP: row-parallel outputs in F, column-parallel inputs in B
      return {{2 * out, 2}, {2 * in, 2}};
    case LayerKind::lm_head:  // column-parallel over the vocabulary
      return {{}, {in, 1}};
    case LayerKind::residual_block:  // fc1 column, fc2 row
      return {{out, 1}, {in, 1}};
    case LayerKind::linear:
    case LayerKind::linear_activation:
      if (split == TensorSplit::row) return {{out, 1}, {}};
      if (split == TensorSplit::column && !first_layer) return {{}, {in, 1}};
      return {};
  }
  return {};
}

LinkVolume scaled(const LinkVolume& elements, std::int64_t bytes_per_element) {
  return {elements.bytes * bytes_per_element, elements.calls};
}

}  // namespace

std::int64_t layer_shard_parameters(const ModelSpec& model, const LayerSpec& layer, TensorSplit split, int ranks) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  const std::int64_t d = model.dim, hidden = std::int64_t{model.mlp_ratio} * model.dim;
  const int t = ranks;
  switch (layer.kind) {
    case LayerKind::embedding:  // vocabulary rows of the token table, the whole position table
      return (std::int64_t{model.vocab} / t + model.context) * d;
    case LayerKind::decoder_block:  // two whole LayerNorms; QKV and MLP up column-, projections row-parallel
      return 4 * d + linear_parameters(d, 3 * d, TensorSplit::column, t) +
             linear_parameters(d, d, TensorSplit::row, t) + linear_parameters(d, hidden, TensorSplit::column, t) +
             linear_parameters(hidden, d, TensorSplit::row, t);
    case LayerKind::lm_head:  // a whole LayerNorm, the projection column-parallel over the vocabulary
      return 2 * d + linear_parameters(d, model.vocab, TensorSplit::column, t);
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return linear_parameters(in, out, split, t);
    case LayerKind::residual_block:  // a whole LayerNorm, fc1 column-, fc2 row-parallel
      return 2 * in + linear_parameters(in, out, TensorSplit::column, t) +
             linear_parameters(out, out, TensorSplit::row, t);
  }
  return 0;
}

std::vector<StageTraffic> stage_traffic(const config::RunConfig& config) {
  const ModelSpec model = ModelSpec::from_config(config.model);
  const auto specs = model.layers();
  const auto ranges = partition_layers(config);
  const int t = config.pipeline.tensor_parallel;
  const int parts = boundary_parts(config.pipeline);
  const std::int64_t rows = config.train.microbatch_size;
  const bool recompute = config.pipeline.recompute == config::Recompute::full;
  const bool sequence_parallel = t > 1 && config.pipeline.sequence_parallel;
  const bool vocab_parallel_loss = t > 1 && model.kind == ModelKind::transformer;
  std::vector<StageTraffic> stages(ranges.size());
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    const LayerRange range = ranges[s];
    StageTraffic& stage = stages[s];
    const bool first = s == 0, last = s + 1 == ranges.size();
    // One split per layer; worked out only for t > 1 (it walks the model's layers).
    const auto splits =
        t > 1 ? tensor_splits(model, range, t) : std::vector<TensorSplit>(range.count, TensorSplit::none);
    LinkVolume forward, backward;
    for (int layer = range.first; layer < range.end(); ++layer) {
      const TensorSplit split = splits[layer - range.first];
      stage.gradient_bytes += layer_shard_parameters(model, specs[layer], split, t) * scalar_bytes;
      if (t == 1) continue;
      const LayerSums sums = sequence_parallel ? sequence_parallel_sums(specs[layer], split, t)
                                               : layer_sums(specs[layer], split, layer == 0);
      forward += sums.forward;
      backward += sums.backward;
      if (sequence_parallel) {
        stage.tensor_step += LinkVolume{row_partial_parameters(model, specs[layer], split) * scalar_bytes,
                                        row_partial_count(specs[layer], split)};
      }
    }
    // Recomputation runs the layers' F again in B; the loss is not recomputed.
    if (recompute) backward += forward;
    // The vocabulary-parallel cross-entropy sums each position's shard maxima (t of them) and its two sums.
    if (vocab_parallel_loss && last) forward += LinkVolume{std::int64_t{model.context} * (t + 2), 2};
    stage.tensor_forward = scaled(forward, rows * scalar_bytes);
    stage.tensor_backward = scaled(backward, rows * scalar_bytes);
    // A sequence-parallel MLP gathers its output rows for the loss (again when recomputing).
    if (sequence_parallel && last && model.kind != ModelKind::transformer) {
      const LinkVolume gather{rows / t * specs[range.end() - 1].output_dim * scalar_bytes, 1};
      stage.tensor_forward += gather;
      if (recompute) stage.tensor_backward += gather;
    }

    const std::int64_t input_bytes = first ? 0 : stages[s - 1].output_bytes;
    stage.output_bytes = last ? 0 : rows * specs[range.end() - 1].output_dim * scalar_bytes;
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
  for (const StageTraffic* stage : stages) {
    step.pipeline += stage->pipeline.times(microbatches);
    step.tensor += stage->tensor_forward.times(microbatches);
    step.tensor += stage->tensor_backward.times(microbatches);
    step.tensor += stage->boundary_gather.times(microbatches);
    step.tensor += stage->tensor_step;
    if (data_parallel > 1) step.data += LinkVolume{stage->gradient_bytes, 1};
  }
  return step;
}

}  // namespace kpipe::model
