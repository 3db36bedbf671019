#pragma once
// Small models the model tests share.

#include "kpipe/model/spec.hpp"

namespace kpipe::test {

// 5 layers: input projection, three residual blocks of width 8, output layer.
inline model::ModelSpec residual_model(std::uint64_t seed = 3) {
  model::ModelSpec spec;
  spec.kind = model::ModelKind::residual_mlp;
  spec.input_dim = 6;
  spec.hidden = {8, 8, 8};
  spec.output_dim = 5;
  spec.seed = seed;
  return spec;
}

}  // namespace kpipe::test
