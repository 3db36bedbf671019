// What the language-model families (transformer, llama) share: the shape
// keys (model.vocab, context, dim, heads, layers, ...), their reading and
// checks, and the plan around the blocks: an embedding, model.layers blocks
// and an LM head.
#include <fmt/format.h>

#include "../divisors.hpp"
#include "builtin_families.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::config::detail {

std::vector<KeySpec> language_model_keys() {
  const ModelConfig d;
  return {
      keys::integer("model.vocab", d.vocab, 0, 1 << 24,
                    "transformer, llama: token vocabulary size; must equal the data's (the error names the right "
                    "value)"),
      keys::integer("model.vocab_divisible_by", d.vocab_divisible_by, 1, 1 << 16,
                    "transformer, llama: the embedding and LM head hold model.vocab rounded up to a multiple of this "
                    "times pipeline.tensor_parallel (Megatron-LM's make-vocab-size-divisible-by); the padded logits "
                    "are masked, checkpoints hold the true vocabulary"),
      keys::boolean("model.tie_embeddings", d.tie_embeddings,
                    "transformer, llama: the LM head is the token embedding's transpose, one parameter (GPT-2, "
                    "Megatron-LM): with p > 1 the first and last stage sum its gradient each step; a transformer "
                    "needs model.head_bias = false"),
      keys::integer("model.context", d.context, 1, 1 << 16, "transformer, llama: tokens per sequence (T)"),
      keys::integer("model.dim", d.dim, 1, 1 << 16, "transformer, llama: model width; a multiple of model.heads"),
      keys::integer("model.heads", d.heads, 1, 1024, "transformer, llama: attention (query) heads per block"),
      keys::integer("model.layers", d.blocks, 1, 4096,
                    "transformer, llama: decoder blocks (the partition adds embedding and head)"),
  };
}

void read_language_model(const Deck& deck, ModelConfig& model) {
  model.vocab = static_cast<int>(deck.integer("model.vocab"));
  model.vocab_divisible_by = static_cast<int>(deck.integer("model.vocab_divisible_by"));
  model.tie_embeddings = deck.boolean("model.tie_embeddings");
  model.context = static_cast<int>(deck.integer("model.context"));
  model.dim = static_cast<int>(deck.integer("model.dim"));
  model.heads = static_cast<int>(deck.integer("model.heads"));
  model.blocks = static_cast<int>(deck.integer("model.layers"));
  // Its samples are T token ids, its outputs T rows of logits.
  model.input_dim = model.context;
  model.output_dim = model.context * model.padded_vocab(1);
  model.hidden.clear();
  if (model.dim % model.heads != 0) {
    throw input_error(fmt::format(
        "{} does not divide {}: each head takes dim / heads features; choose heads from "
        "the divisors of {} (e.g. {})",
        deck.describe("model.heads"), deck.describe("model.dim"), model.dim, nearest_divisor(model.dim, model.heads)));
  }
  if (model.vocab < 1) {
    throw input_error(
        fmt::format("{}: a {} needs its vocabulary size; set it to the number of symbols in "
                    "the data (a wrong value is reported with the right one)",
                    deck.describe("model.vocab"), model.kind));
  }
}

void check_language_model(const ModelConfig& model) {
  if (model.vocab < 1 || model.context < 1 || model.dim < 1 || model.heads < 1 || model.blocks < 1) {
    throw input_error(
        fmt::format("a {} needs model.vocab, context, dim, heads and layers >= 1 (now {}, {}, {}, {}, {})", model.kind,
                    model.vocab, model.context, model.dim, model.heads, model.blocks));
  }
  if (model.dim % model.heads != 0) {
    throw input_error(
        fmt::format("model.heads = {} does not divide model.dim = {}; each head takes dim / heads features",
                    model.heads, model.dim));
  }
}

std::vector<PlannedLayer> language_model_layers(const ModelConfig& model, const std::string& embedding,
                                                const std::string& head) {
  const int width = model.context * model.dim;
  std::vector<PlannedLayer> layers{{embedding, model.context, width}};
  for (int b = 0; b < model.blocks; ++b) layers.push_back(repeated_block(model, width));
  layers.push_back({head, width, model.context * model.padded_vocab(1)});
  return layers;
}

}  // namespace kpipe::config::detail
