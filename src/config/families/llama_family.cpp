// "llama": the Llama-family decoder (Touvron et al. 2023; Hugging Face's
// LlamaForCausalLM): token embedding without positions, blocks of RMSNorm,
// grouped-query attention with rotary positions, RMSNorm and a SwiGLU MLP,
// no biases, then RMSNorm and the LM head.
#include <fmt/format.h>

#include "../divisors.hpp"
#include "builtin_families.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::config::detail {

namespace {

std::vector<KeySpec> llama_keys() {
  std::vector<KeySpec> keys = language_model_keys();
  keys.push_back(keys::integer("model.kv_heads", 0, 0, 1024,
                               "llama: key/value heads of grouped-query attention, each shared by heads / kv_heads "
                               "query heads; a divisor of model.heads; 0: model.heads (multi-head attention). "
                               "pipeline.tensor_parallel divides it, or is a multiple of it: each key/value head is "
                               "then replicated on t / kv_heads ranks"));
  keys.push_back(keys::integer("model.ffn_dim", 344, 1, 1 << 20,
                               "llama: the SwiGLU MLP's intermediate width (Hugging Face's intermediate_size)"));
  keys.push_back(keys::real("model.rope_theta", 10000.0, 0.0, 1e9, true,
                            "llama: the base of the rotary embeddings' angles, position · theta^(-2i/head width), in "
                            "Hugging Face's rotate-half convention"));
  keys.push_back(keys::real("model.norm_eps", 1e-5, 0.0, 1.0, true, "llama: the RMSNorms' epsilon"));
  return keys;
}

int kv_heads(const ModelConfig& model) { return static_cast<int>(model.integer("model.kv_heads")); }

void read(const Deck& deck, ModelConfig& model) {
  read_language_model(deck, model);
  model.head_bias = false;
  // model.kv_heads = 0 reads as model.heads.
  if (kv_heads(model) == 0) model.values["model.kv_heads"] = std::int64_t{model.heads};
  if (model.heads % kv_heads(model) != 0) {
    throw input_error(fmt::format(
        "{} does not divide {}: each key/value head serves heads / kv_heads query heads; choose kv_heads from the "
        "divisors of {} (e.g. {})",
        deck.describe("model.kv_heads"), deck.describe("model.heads"), model.heads,
        nearest_divisor(model.heads, kv_heads(model))));
  }
  if ((model.dim / model.heads) % 2 != 0) {
    throw input_error(fmt::format(
        "{} and {} give {} features per head, an odd number: rotary embeddings turn pairs of features; choose an "
        "even model.dim / model.heads",
        deck.describe("model.dim"), deck.describe("model.heads"), model.dim / model.heads));
  }
}

}  // namespace

ModelFamily llama_family() {
  ModelFamily family;
  family.name = "llama";
  family.doc =
      "a Llama-family decoder: RMSNorm, grouped-query attention with rotary positions, a SwiGLU MLP, no biases";
  family.keys = llama_keys();
  family.token_sequences = true;
  family.block = "llama_block";
  family.read = read;
  family.layers = [](const ModelConfig& model) {
    check_language_model(model);
    if (kv_heads(model) < 1 || model.heads % kv_heads(model) != 0 || (model.dim / model.heads) % 2 != 0) {
      throw input_error(fmt::format(
          "a llama needs model.kv_heads dividing model.heads and an even head width (now kv_heads {}, heads {}, "
          "dim {})",
          kv_heads(model), model.heads, model.dim));
    }
    return language_model_layers(model, "token_embedding", "llama_head");
  };
  // Query heads, whole key/value groups and the MLP's intermediate width;
  // its vocabulary is padded to a multiple of t.
  family.split_widths = [](const ModelConfig& model) -> std::vector<SplitWidth> {
    return {{"model.heads", model.heads},
            {"model.kv_heads", kv_heads(model), true},
            {"model.ffn_dim", static_cast<int>(model.integer("model.ffn_dim"))}};
  };
  return family;
}

}  // namespace kpipe::config::detail
