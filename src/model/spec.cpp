#include "kpipe/model/spec.hpp"

#include <fmt/format.h>

#include "kernel_choices.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/layer_kind.hpp"

namespace kpipe::model {

namespace {

// The deck schema and config::model_layer_count already enforce these for
// decks; a spec assembled in code gets the same checks here.
void check_dims(const ModelSpec& spec) {
  if (spec.input_dim < 1 || spec.output_dim < 1) {
    throw input_error(fmt::format("model.input_dim = {} and model.output_dim = {} must both be >= 1", spec.input_dim,
                                  spec.output_dim));
  }
  for (const int width : spec.hidden) {
    if (width < 1) throw input_error(fmt::format("model.hidden holds {}; every hidden width must be >= 1", width));
  }
  if (spec.kind != ModelKind::residual_mlp) return;
  if (spec.hidden.empty()) throw input_error("model.hidden is empty; a residual_mlp needs at least one hidden width");
  for (const int width : spec.hidden) {
    if (width != spec.hidden.front()) {
      throw input_error(
          fmt::format("model.hidden holds {} and {}; residual_mlp blocks add their input to their "
                      "output, so every hidden width must be the same",
                      spec.hidden.front(), width));
    }
  }
}

void check_transformer(const ModelSpec& spec) {
  if (spec.vocab < 1 || spec.context < 1 || spec.dim < 1 || spec.heads < 1 || spec.blocks < 1 || spec.mlp_ratio < 1) {
    throw input_error(
        fmt::format("a transformer needs model.vocab, context, dim, heads, layers and mlp_ratio >= 1 "
                    "(now {}, {}, {}, {}, {}, {})",
                    spec.vocab, spec.context, spec.dim, spec.heads, spec.blocks, spec.mlp_ratio));
  }
  if (spec.dim % spec.heads != 0) {
    throw input_error(fmt::format(
        "model.heads = {} does not divide model.dim = {}; each head takes dim / heads features", spec.heads, spec.dim));
  }
}

// Global layer of kind `kind`, in -> out wide per sample, its FLOPs from the
// kind's own footprint.
LayerSpec layer_of(const ModelSpec& model, const LayerKind& kind, int in, int out) {
  LayerSpec layer{&kind, in, out};
  layer.flops = kind.footprint(model, layer, FootprintQuery{}).forward_flops;
  return layer;
}

// The kind of the repeated block: model.block, or the family's own.
const LayerKind& block_kind(const ModelSpec& model, const char* family_block) {
  return model.block.empty() ? layer_kind(family_block) : layer_kind(model.block, "model.block");
}

std::vector<LayerSpec> transformer_layers(const ModelSpec& spec) {
  const int width = spec.context * spec.dim;
  const LayerKind& block = block_kind(spec, "decoder_block");
  std::vector<LayerSpec> out;
  out.push_back(layer_of(spec, layer_kind("embedding"), spec.context, width));
  for (int b = 0; b < spec.blocks; ++b) out.push_back(layer_of(spec, block, width, width));
  out.push_back(layer_of(spec, layer_kind("lm_head"), width, spec.context * spec.padded_vocab(1)));
  return out;
}

}  // namespace

ModelSpec ModelSpec::from_config(const config::ModelConfig& config) {
  ModelSpec spec;
  spec.kind = config.kind;
  spec.input_dim = config.input_dim;
  spec.hidden = config.hidden;
  spec.output_dim = config.output_dim;
  spec.activation = detail::activation(config.activation);
  spec.loss = config.loss;
  spec.seed = config.seed;
  spec.init = config.init;
  if (config.kind == ModelKind::transformer) {
    spec.vocab = config.vocab;
    spec.vocab_divisible_by = config.vocab_divisible_by;
    spec.head_bias = config.head_bias;
    spec.tie_embeddings = config.tie_embeddings;
    spec.context = config.context;
    spec.dim = config.dim;
    spec.heads = config.heads;
    spec.blocks = config.layers;
    spec.mlp_ratio = config.mlp_ratio;
    spec.input_dim = config.context;
    spec.output_dim = spec.context * spec.padded_vocab(1);
    spec.hidden.clear();
  }
  spec.block = config.block;
  return spec;
}

std::int64_t training_flops_per_sample(const ModelSpec& model) {
  std::int64_t forward = 0;
  for (const LayerSpec& layer : model.layers()) forward += forward_flops(layer);
  return 3 * forward;
}

std::vector<LayerSpec> ModelSpec::layers() const {
  if (kind == ModelKind::transformer) {
    check_transformer(*this);
    return transformer_layers(*this);
  }
  check_dims(*this);
  std::vector<LayerSpec> out;
  if (kind == ModelKind::mlp) {
    int width = input_dim;
    for (const int next : hidden) {
      out.push_back(layer_of(*this, layer_kind("linear_activation"), width, next));
      width = next;
    }
    out.push_back(layer_of(*this, layer_kind("linear"), width, output_dim));
    return out;
  }
  const int width = hidden.front();
  const LayerKind& block = block_kind(*this, "residual_block");
  out.push_back(layer_of(*this, layer_kind("linear"), input_dim, width));
  for (std::size_t b = 0; b < hidden.size(); ++b) out.push_back(layer_of(*this, block, width, width));
  out.push_back(layer_of(*this, layer_kind("linear"), width, output_dim));
  return out;
}

}  // namespace kpipe::model
