#include "kpipe/model/memory.hpp"

namespace kpipe::model {

namespace {

// The sizes a transformer layer's tensors are made of, for `rows` sequences.
struct TransformerSizes {
  std::int64_t N, d, hidden, heads, vocab, tokens;

  TransformerSizes(const ModelSpec& model, int rows)
      : N(static_cast<std::int64_t>(rows) * model.context),
        d(model.dim),
        hidden(static_cast<std::int64_t>(model.dim) * model.mlp_ratio),
        heads(model.heads),
        vocab(model.vocab),
        tokens(model.context) {}

  std::int64_t linear(std::int64_t in, std::int64_t out) const { return in * out + out; }
  // What attention saves: Q, K, V and either P (b·heads·T·T) or O and the log-sum-exp.
  std::int64_t attention(kernels::AttentionPath path) const {
    const std::int64_t qkv = 3 * N * d;
    return path == kernels::AttentionPath::gemm ? qkv + N * heads * tokens : qkv + N * d + N * heads;
  }
};

}  // namespace

std::int64_t layer_parameters(const ModelSpec& model, const LayerSpec& layer) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  const TransformerSizes t(model, 1);
  switch (layer.kind) {
    case LayerKind::embedding:
      return (t.vocab + t.tokens) * t.d;
    case LayerKind::decoder_block:  // two LayerNorms, QKV, output projection, MLP up and down
      return 4 * t.d + t.linear(t.d, 3 * t.d) + t.linear(t.d, t.d) + t.linear(t.d, t.hidden) + t.linear(t.hidden, t.d);
    case LayerKind::lm_head:
      return 2 * t.d + t.linear(t.d, t.vocab);
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return in * out + out;
    case LayerKind::residual_block:
      return 2 * in + (in * out + out) + (out * out + out);
  }
  return 0;
}

std::int64_t layer_linear_weights(const ModelSpec& model, const LayerSpec& layer) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  const TransformerSizes t(model, 1);
  switch (layer.kind) {
    case LayerKind::embedding:
      return 0;
    case LayerKind::decoder_block:  // QKV, output projection, MLP up and down
      return t.d * 3 * t.d + t.d * t.d + 2 * t.d * t.hidden;
    case LayerKind::lm_head:
      return t.d * t.vocab;
    case LayerKind::linear:
    case LayerKind::linear_activation:
      return in * out;
    case LayerKind::residual_block:
      return in * out + out * out;
  }
  return 0;
}

std::int64_t layer_saved(const ModelSpec& model, const LayerSpec& layer, int rows, kernels::AttentionPath attention) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  const TransformerSizes t(model, rows);
  switch (layer.kind) {
    case LayerKind::embedding:  // the token ids
      return rows * in;
    case LayerKind::decoder_block:  // per LN x̂ and 1/std; each Linear's input; attention; GELU's input
      return 2 * t.N * (t.d + 1) + t.N * t.d + t.attention(attention) + t.N * t.d + t.N * t.d + 2 * t.N * t.hidden;
    case LayerKind::lm_head:  // LN x̂ and 1/std, the projection's input
      return t.N * (t.d + 1) + t.N * t.d;
    case LayerKind::linear:  // the input
      return rows * in;
    case LayerKind::linear_activation:  // the Linear's input and the activation's
      return rows * (in + out);
    case LayerKind::residual_block:  // LN: x̂ and 1/std; fc1, activation and fc2: their inputs
      return rows * (in + 1) + rows * in + rows * out + rows * out;
  }
  return 0;
}

std::int64_t layer_kept_for_weight_gradient(const ModelSpec& model, const LayerSpec& layer, int rows) {
  const std::int64_t in = layer.input_dim, out = layer.output_dim;
  const TransformerSizes t(model, rows);
  switch (layer.kind) {
    case LayerKind::embedding:  // the ids and dy
      return rows * in + rows * out;
    case LayerKind::decoder_block:  // per LN x̂ and dy; each Linear's x and dy; attention keeps nothing
      return 2 * 2 * t.N * t.d + t.N * 4 * t.d + t.N * 2 * t.d + t.N * (t.d + t.hidden) + t.N * (t.hidden + t.d);
    case LayerKind::lm_head:
      return 2 * t.N * t.d + t.N * (t.d + t.vocab);
    case LayerKind::linear:
    case LayerKind::linear_activation:  // the Linear's x and dy; the activation keeps nothing
      return rows * (in + out);
    case LayerKind::residual_block:  // LN: x̂ and dy; fc1 and fc2: x and dy
      return rows * 2 * in + rows * (in + out) + rows * (out + out);
  }
  return 0;
}

StageFootprint stage_footprint(const ModelSpec& model, LayerRange layers, int rows, bool recompute,
                               kernels::AttentionPath attention) {
  const auto specs = model.layers();
  StageFootprint footprint;
  footprint.input_per_microbatch = static_cast<std::int64_t>(rows) * specs.at(layers.first).input_dim;
  footprint.output_per_microbatch = static_cast<std::int64_t>(rows) * specs.at(layers.end() - 1).output_dim;
  for (int layer = layers.first; layer < layers.end(); ++layer) {
    footprint.parameters += layer_parameters(model, specs[layer]);
    footprint.linear_weights += layer_linear_weights(model, specs[layer]);
    footprint.saved_per_microbatch += layer_saved(model, specs[layer], rows, attention);
    footprint.kept_for_weight_gradient += layer_kept_for_weight_gradient(model, specs[layer], rows);
  }
  footprint.stash_per_microbatch = recompute ? footprint.input_per_microbatch : footprint.saved_per_microbatch;
  return footprint;
}

}  // namespace kpipe::model
