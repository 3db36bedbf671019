#include "kpipe/model/memory.hpp"

#include "kpipe/model/layer_kind.hpp"

namespace kpipe::model {

StageFootprint stage_footprint(const ModelSpec& model, LayerRange layers, const FootprintQuery& query, bool recompute) {
  const auto specs = model.layers();
  const bool sharded_rows = query.sequence_parallel && query.tensor_ranks > 1;
  // With sequence parallelism a boundary between stages holds a rank's rows; the data and the loss's input are whole.
  const auto boundary_rows = [&](bool model_end) {
    return static_cast<std::int64_t>(sharded_rows && !model_end ? query.rows / query.tensor_ranks : query.rows);
  };
  const LayerFootprint layer_sum = layers_footprint(model, layers, query);
  StageFootprint footprint;
  footprint.input_per_microbatch = boundary_rows(layers.first == 0) * specs.at(layers.first).input_dim;
  footprint.output_per_microbatch =
      boundary_rows(layers.end() == static_cast<int>(specs.size())) * specs.at(layers.end() - 1).output_dim;
  footprint.parameters = layer_sum.parameters;
  footprint.linear_weights = layer_sum.linear_weights;
  footprint.saved_per_microbatch = layer_sum.saved;
  footprint.kept_for_weight_gradient = layer_sum.kept_for_weight_gradient;
  footprint.saved_in_scalar = layer_sum.saved_in_scalar;
  footprint.kept_in_scalar = layer_sum.kept_in_scalar;
  footprint.workspace = layer_sum.workspace;
  footprint.intermediates = layer_sum.intermediates;
  footprint.stash_per_microbatch = recompute ? footprint.input_per_microbatch : footprint.saved_per_microbatch;
  // A recomputing stage keeps its input: data at the first stage, an activation between layers past it.
  footprint.stash_in_scalar =
      recompute ? (layers.first == 0 ? footprint.input_per_microbatch : 0) : footprint.saved_in_scalar;
  return footprint;
}

ActivationBytes activation_bytes(const StageFootprint& footprint, int scalar_bytes, int stored_bytes) {
  const auto bytes = [&](std::int64_t elements, std::int64_t in_scalar) {
    return (elements - in_scalar) * stored_bytes + in_scalar * scalar_bytes;
  };
  return {bytes(footprint.stash_per_microbatch, footprint.stash_in_scalar),
          bytes(footprint.saved_per_microbatch, footprint.saved_in_scalar),
          bytes(footprint.kept_for_weight_gradient, footprint.kept_in_scalar)};
}

}  // namespace kpipe::model
