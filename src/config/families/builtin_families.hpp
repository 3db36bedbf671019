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

// The family's repeated block, `width` wide: model.block's kind, or the
// family's own.
inline PlannedLayer repeated_block(const ModelConfig& model, int width) {
  if (model.block.empty()) return {model.family().block, width, width};
  return {model.block, width, width, "model.block"};
}

}  // namespace kpipe::config::detail
