#pragma once
// kpipe's own model families, each in its own file beside this one. They
// reach the registry (model_family.hpp) through the same checks as a
// project's.

#include "kpipe/config/model_family.hpp"
#include "kpipe/config/run_config.hpp"

namespace kpipe::config::detail {

ModelFamily mlp_family();
ModelFamily residual_mlp_family();
ModelFamily transformer_family();
ModelFamily llama_family();

// The language-model families' shared keys (model.vocab, context, dim,
// heads, layers, ...), their reading (with the sample widths: T token ids
// in, T rows of padded_vocab(1) logits out) and checks, and their plan: the
// `embedding` kind, model.layers repeated blocks, the `head` kind.
std::vector<KeySpec> language_model_keys();
void read_language_model(const Deck& deck, ModelConfig& model);
void check_language_model(const ModelConfig& model);
std::vector<PlannedLayer> language_model_layers(const ModelConfig& model, const std::string& embedding,
                                                const std::string& head);

// The family's repeated block, `width` wide: model.block's kind, or the
// family's own.
inline PlannedLayer repeated_block(const ModelConfig& model, int width) {
  if (model.block.empty()) return {model.family().block, width, width};
  return {model.block, width, width, "model.block"};
}

}  // namespace kpipe::config::detail
