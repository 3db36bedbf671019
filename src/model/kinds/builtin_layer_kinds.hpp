#pragma once
// kpipe's own layer kinds, each in its own file beside this one. They reach
// the registry (layer_kind.hpp) through the same checks as a project's.

#include <vector>

#include "kpipe/model/layer_kind.hpp"

namespace kpipe::model::detail {

LayerKind linear_layer_kind();
LayerKind linear_activation_layer_kind();
LayerKind residual_block_layer_kind();
LayerKind embedding_layer_kind();
LayerKind decoder_block_layer_kind();
LayerKind lm_head_layer_kind();

// The kinds above, in the order the registry lists them.
std::vector<LayerKind> builtin_layer_kinds();

}  // namespace kpipe::model::detail
