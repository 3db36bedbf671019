// "transformer": a GPT-2-style decoder-only language model. Its layers are
// the embedding (token and position), one pre-LayerNorm decoder block per
// model.layers and the LM head.
#include <fmt/format.h>

#include "builtin_families.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::config::detail {

ModelFamily transformer_family() {
  const ModelConfig d;
  ModelFamily family;
  family.name = "transformer";
  family.doc = "a GPT-2-style decoder-only transformer over token sequences";
  family.keys = language_model_keys();
  family.keys.push_back(keys::boolean(
      "model.head_bias", d.head_bias,
      "transformer: the LM head adds a learned bias to the logits; false as GPT-2 (needed by kpipe export)"));
  family.keys.push_back(keys::integer("model.mlp_ratio", d.mlp_ratio, 1, 64, "transformer: MLP hidden width / width"));
  family.token_sequences = true;
  family.block = "decoder_block";
  family.read = [](const Deck& deck, ModelConfig& model) {
    read_language_model(deck, model);
    model.head_bias = deck.boolean("model.head_bias");
    model.mlp_ratio = static_cast<int>(deck.integer("model.mlp_ratio"));
    if (model.tie_embeddings && model.head_bias) {
      throw input_error(
          fmt::format("{} makes the LM head the token embedding's transpose, which has no bias; set "
                      "model.head_bias = false",
                      deck.describe("model.tie_embeddings")));
    }
  };
  family.layers = [](const ModelConfig& model) {
    check_language_model(model);
    if (model.mlp_ratio < 1) {
      throw input_error(fmt::format("model.mlp_ratio = {} must be >= 1", model.mlp_ratio));
    }
    return language_model_layers(model, "embedding", "lm_head");
  };
  // Its heads, width and MLP width; its vocabulary is padded to a multiple of t.
  family.split_widths = [](const ModelConfig& model) -> std::vector<SplitWidth> {
    return {{"model.heads", model.heads},
            {"model.dim", model.dim},
            {"the MLP width model.mlp_ratio * model.dim", model.mlp_ratio * model.dim}};
  };
  return family;
}

}  // namespace kpipe::config::detail
