#include "kpipe/model/memory.hpp"

namespace kpipe::model {

std::int64_t layer_parameters(const LayerSpec& layer) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  switch (layer.kind) {
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return in * out + out;
    case LayerKind::residual_block:
      return 2 * in + (in * out + out) + (out * out + out);
  }
  return 0;
}

std::int64_t layer_saved(const LayerSpec& layer, int rows) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  switch (layer.kind) {
    case LayerKind::linear:  // the input
      return rows * in;
    case LayerKind::linear_activation:  // the Linear's input and the activation's
      return rows * (in + out);
    case LayerKind::residual_block:  // LN: x̂ and 1/std; fc1, activation and fc2: their inputs
      return rows * (in + 1) + rows * in + rows * out + rows * out;
  }
  return 0;
}

std::int64_t layer_kept_for_weight_gradient(const LayerSpec& layer, int rows) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  switch (layer.kind) {
    case LayerKind::linear:
    case LayerKind::linear_activation:  // the Linear's x and dy; the activation keeps nothing
      return rows * (in + out);
    case LayerKind::residual_block:  // LN: x̂ and dy; fc1 and fc2: x and dy
      return rows * 2 * in + rows * (in + out) + rows * (out + out);
  }
  return 0;
}

StageFootprint stage_footprint(const ModelSpec& model, LayerRange layers, int rows, bool recompute) {
  const auto specs = model.layers();
  StageFootprint footprint;
  footprint.input_per_microbatch = static_cast<std::int64_t>(rows) * specs.at(layers.first).input_dim;
  footprint.output_per_microbatch = static_cast<std::int64_t>(rows) * specs.at(layers.end() - 1).output_dim;
  for (int layer = layers.first; layer < layers.end(); ++layer) {
    footprint.parameters += layer_parameters(specs[layer]);
    footprint.saved_per_microbatch += layer_saved(specs[layer], rows);
    footprint.kept_for_weight_gradient += layer_kept_for_weight_gradient(specs[layer], rows);
  }
  footprint.stash_per_microbatch = recompute ? footprint.input_per_microbatch : footprint.saved_per_microbatch;
  return footprint;
}

}  // namespace kpipe::model
