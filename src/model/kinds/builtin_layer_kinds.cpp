#include "builtin_layer_kinds.hpp"

namespace kpipe::model::detail {

std::vector<LayerKind> builtin_layer_kinds() {
  std::vector<LayerKind> kinds;
  kinds.push_back(linear_layer_kind());
  kinds.push_back(linear_activation_layer_kind());
  kinds.push_back(residual_block_layer_kind());
  kinds.push_back(embedding_layer_kind());
  kinds.push_back(decoder_block_layer_kind());
  kinds.push_back(lm_head_layer_kind());
  kinds.push_back(token_embedding_layer_kind());
  kinds.push_back(llama_block_layer_kind());
  kinds.push_back(llama_head_layer_kind());
  return kinds;
}

}  // namespace kpipe::model::detail
