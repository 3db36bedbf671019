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
  footprint.saved_linear_operands = layer_sum.saved_linear_operands;
  footprint.kept_linear_operands = layer_sum.kept_linear_operands;
  footprint.workspace = layer_sum.workspace;
  footprint.stash_per_microbatch = recompute ? footprint.input_per_microbatch : footprint.saved_per_microbatch;
  return footprint;
}

ActivationBytes activation_bytes(const StageFootprint& footprint, bool recompute, int scalar_bytes, int operand_bytes) {
  const auto bytes = [&](std::int64_t elements, std::int64_t operands) {
    return (elements - operands) * scalar_bytes + operands * operand_bytes;
  };
  ActivationBytes out;
  out.saved = bytes(footprint.saved_per_microbatch, footprint.saved_linear_operands);
  out.kept = bytes(footprint.kept_for_weight_gradient, footprint.kept_linear_operands);
  out.stash = recompute ? footprint.input_per_microbatch * scalar_bytes : out.saved;
  return out;
}

}  // namespace kpipe::model
