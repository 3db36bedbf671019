#pragma once
// kpipe's own layer kinds, each in its own file beside this one. They reach
// the registry (layer_kind.hpp) through the same checks as a project's.

#include <memory>
#include <vector>

#include "kpipe/model/layer_kind.hpp"

namespace kpipe::model::detail {

LayerKind linear_layer_kind();
LayerKind linear_activation_layer_kind();
LayerKind residual_block_layer_kind();
LayerKind embedding_layer_kind();
LayerKind decoder_block_layer_kind();
LayerKind lm_head_layer_kind();
LayerKind token_embedding_layer_kind();
LayerKind llama_block_layer_kind();
LayerKind llama_head_layer_kind();

// The token embedding's footprint, with or without its learned position table.
LayerFootprint embedding_footprint(const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query,
                                   bool learned_positions);

// The kinds above, in the order the registry lists them.
std::vector<LayerKind> builtin_layer_kinds();

// The Linear of the pairing kinds (linear, linear_activation): spec.input_dim
// x spec.output_dim, split as the stage pairs it, its weight from stream 0.
template <class Scalar>
std::unique_ptr<Linear<Scalar>> pairing_linear(const LayerBuild& build) {
  const LayerSpec& spec = build.spec;
  return std::make_unique<Linear<Scalar>>(spec.input_dim, spec.output_dim, build.name(), build.weight_stream(0),
                                          build.init(spec.input_dim, spec.output_dim), build.kernels, build.env,
                                          build.split);
}

}  // namespace kpipe::model::detail
