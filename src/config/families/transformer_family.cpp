// "transformer": a GPT-2-style decoder-only language model. Its samples are
// model.context token ids; its layers the embedding (token and position),
// one pre-LayerNorm decoder block per model.layers and the LM head.
#include <fmt/format.h>

#include "../divisors.hpp"
#include "builtin_families.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::config::detail {

namespace {

std::vector<KeySpec> transformer_keys() {
  const ModelConfig d;
  return {
      keys::integer("model.vocab", d.vocab, 0, 1 << 24,
                    "transformer: token vocabulary size; must equal the data's (the error names the right value)"),
      keys::integer("model.vocab_divisible_by", d.vocab_divisible_by, 1, 1 << 16,
                    "transformer: the embedding and LM head hold model.vocab rounded up to a multiple of this times "
                    "pipeline.tensor_parallel (Megatron-LM's make-vocab-size-divisible-by); the padded logits are "
                    "masked, checkpoints hold the true vocabulary"),
      keys::boolean("model.head_bias", d.head_bias,
                    "transformer: the LM head adds a learned bias to the logits; false as GPT-2 (needed by kpipe "
                    "export)"),
      keys::boolean("model.tie_embeddings", d.tie_embeddings,
                    "transformer: the LM head is the token embedding's transpose, one parameter (GPT-2, "
                    "Megatron-LM): with p > 1 the first and last stage sum its gradient each step; needs "
                    "model.head_bias = false"),
      keys::integer("model.context", d.context, 1, 1 << 16, "transformer: tokens per sequence (T)"),
      keys::integer("model.dim", d.dim, 1, 1 << 16, "transformer: model width; a multiple of model.heads"),
      keys::integer("model.heads", d.heads, 1, 1024, "transformer: attention heads per block"),
      keys::integer("model.layers", d.blocks, 1, 4096,
                    "transformer: decoder blocks (the partition adds embedding and head)"),
      keys::integer("model.mlp_ratio", d.mlp_ratio, 1, 64, "transformer: MLP hidden width / width"),
  };
}

// Its samples are T token ids, its outputs T rows of logits.
void derive_sample_widths(ModelConfig& model) {
  model.input_dim = model.context;
  model.output_dim = model.context * model.padded_vocab(1);
  model.hidden.clear();
}

void read(const Deck& deck, ModelConfig& model) {
  model.vocab = static_cast<int>(deck.integer("model.vocab"));
  model.vocab_divisible_by = static_cast<int>(deck.integer("model.vocab_divisible_by"));
  model.head_bias = deck.boolean("model.head_bias");
  model.tie_embeddings = deck.boolean("model.tie_embeddings");
  model.context = static_cast<int>(deck.integer("model.context"));
  model.dim = static_cast<int>(deck.integer("model.dim"));
  model.heads = static_cast<int>(deck.integer("model.heads"));
  model.blocks = static_cast<int>(deck.integer("model.layers"));
  model.mlp_ratio = static_cast<int>(deck.integer("model.mlp_ratio"));
  derive_sample_widths(model);
  if (model.dim % model.heads != 0) {
    throw input_error(fmt::format(
        "{} does not divide {}: each head takes dim / heads features; choose heads from "
        "the divisors of {} (e.g. {})",
        deck.describe("model.heads"), deck.describe("model.dim"), model.dim, nearest_divisor(model.dim, model.heads)));
  }
  if (model.vocab < 1) {
    throw input_error(
        fmt::format("{}: a transformer needs its vocabulary size; set it to the number of symbols in "
                    "the data (a wrong value is reported with the right one)",
                    deck.describe("model.vocab")));
  }
  if (model.tie_embeddings && model.head_bias) {
    throw input_error(
        fmt::format("{} makes the LM head the token embedding's transpose, which has no bias; set "
                    "model.head_bias = false",
                    deck.describe("model.tie_embeddings")));
  }
}

// A spec assembled in code gets the deck's checks here.
void check_shape(const ModelConfig& model) {
  if (model.vocab < 1 || model.context < 1 || model.dim < 1 || model.heads < 1 || model.blocks < 1 ||
      model.mlp_ratio < 1) {
    throw input_error(
        fmt::format("a transformer needs model.vocab, context, dim, heads, layers and mlp_ratio >= 1 "
                    "(now {}, {}, {}, {}, {}, {})",
                    model.vocab, model.context, model.dim, model.heads, model.blocks, model.mlp_ratio));
  }
  if (model.dim % model.heads != 0) {
    throw input_error(
        fmt::format("model.heads = {} does not divide model.dim = {}; each head takes dim / heads features",
                    model.heads, model.dim));
  }
}

}  // namespace

ModelFamily transformer_family() {
  ModelFamily family;
  family.name = "transformer";
  family.doc = "a GPT-2-style decoder-only transformer over token sequences";
  family.keys = transformer_keys();
  family.token_sequences = true;
  family.block = "decoder_block";
  family.read = read;
  family.layers = [](const ModelConfig& model) {
    check_shape(model);
    const int width = model.context * model.dim;
    std::vector<PlannedLayer> layers{{"embedding", model.context, width}};
    for (int b = 0; b < model.blocks; ++b) layers.push_back(repeated_block(model, width));
    layers.push_back({"lm_head", width, model.context * model.padded_vocab(1)});
    return layers;
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
