#pragma once
// Small models the model tests share.

#include <cstdint>
#include <vector>

#include "kpipe/model/spec.hpp"
#include "kpipe/model/stage.hpp"

namespace kpipe::test {

// 5 layers: input projection, three residual blocks of width 8, output layer.
inline model::ModelSpec residual_model(std::uint64_t seed = 3) {
  model::ModelSpec spec;
  spec.kind = "residual_mlp";
  spec.input_dim = 6;
  spec.hidden = {8, 8, 8};
  spec.output_dim = 5;
  spec.seed = seed;
  return spec;
}

// A decoder-only transformer of two blocks (4 layers: embedding, two
// blocks, head) of width 8 and 2 heads, MLP ratio 2.
inline model::ModelSpec small_transformer(int vocab, int context, config::InitKind init, std::uint64_t seed) {
  model::ModelSpec spec;
  spec.kind = "transformer";
  spec.vocab = vocab;
  spec.vocab_divisible_by = 1;
  spec.context = context;
  spec.dim = 8;
  spec.heads = 2;
  spec.blocks = 2;
  spec.mlp_ratio = 2;
  spec.input_dim = spec.context;
  spec.output_dim = spec.context * spec.vocab;
  spec.init = init;
  spec.seed = seed;
  return spec;
}

// A Llama of two blocks (4 layers: token embedding, two blocks, head) of
// width 8: 2 query heads sharing 1 key/value head of 4 features, rotary
// positions, SwiGLU of 12.
inline model::ModelSpec small_llama(int vocab, int context, std::uint64_t seed) {
  model::ModelSpec spec = small_transformer(vocab, context, config::InitKind::automatic, seed);
  spec.kind = "llama";
  spec.head_bias = false;
  spec.values = {{"model.kv_heads", std::int64_t{1}},
                 {"model.ffn_dim", std::int64_t{12}},
                 {"model.rope_theta", 100.0},
                 {"model.norm_eps", 1e-5}};
  return spec;
}

// The gradients of `parameters` (a stage's or a layer's), flattened one after the other.
template <class Scalar>
std::vector<Scalar> gradients_of(const std::vector<model::Parameter<Scalar>>& parameters) {
  std::vector<Scalar> all;
  for (const auto& p : parameters) {
    const auto grad = tensor::to_host<Scalar>(p.grad);
    all.insert(all.end(), grad.begin(), grad.end());
  }
  return all;
}

// Trainable values a built stage holds: what a footprint's parameters count.
inline std::int64_t parameter_elements(const model::Stage<double>& stage) {
  std::int64_t total = 0;
  for (const auto& p : stage.parameters()) total += static_cast<std::int64_t>(p.value.size());
  return total;
}

}  // namespace kpipe::test
