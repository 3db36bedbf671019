#include "kpipe/model/spec.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"

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

kernels::Activation kernel_activation(config::ActivationKind kind) {
  switch (kind) {
    case config::ActivationKind::gelu:
      return kernels::Activation::gelu;
    case config::ActivationKind::relu:
      return kernels::Activation::relu;
    case config::ActivationKind::tanh:
      return kernels::Activation::tanh;
  }
  throw runtime_error("unknown activation kind");
}

}  // namespace

ModelSpec ModelSpec::from_config(const config::ModelConfig& config) {
  ModelSpec spec;
  spec.kind = config.kind;
  spec.input_dim = config.input_dim;
  spec.hidden = config.hidden;
  spec.output_dim = config.output_dim;
  spec.activation = kernel_activation(config.activation);
  spec.loss = config.loss;
  spec.seed = config.seed;
  spec.init = config.init;
  if (config.kind == ModelKind::transformer) {
    spec.vocab = config.vocab;
    spec.context = config.context;
    spec.dim = config.dim;
    spec.heads = config.heads;
    spec.blocks = config.layers;
    spec.mlp_ratio = config.mlp_ratio;
    spec.input_dim = config.context;
    spec.output_dim = config.context * config.vocab;
    spec.hidden.clear();
  }
  return spec;
}

std::vector<LayerSpec> ModelSpec::layers() const {
  check_dims(*this);
  std::vector<LayerSpec> out;
  if (kind == ModelKind::mlp) {
    int width = input_dim;
    for (const int next : hidden) {
      out.push_back({LayerKind::linear_activation, width, next});
      width = next;
    }
    out.push_back({LayerKind::linear, width, output_dim});
    return out;
  }
  const int width = hidden.front();
  out.push_back({LayerKind::linear, input_dim, width});
  for (std::size_t block = 0; block < hidden.size(); ++block) out.push_back({LayerKind::residual_block, width, width});
  out.push_back({LayerKind::linear, width, output_dim});
  return out;
}

std::int64_t forward_flops(const LayerSpec& layer) {
  const std::int64_t linear = 2 * static_cast<std::int64_t>(layer.input_dim) * layer.output_dim;
  return layer.kind == LayerKind::residual_block ? 2 * linear : linear;
}

}  // namespace kpipe::model
