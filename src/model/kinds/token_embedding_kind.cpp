// "token_embedding": the token table alone (TokenEmbedding without learned
// positions), for models whose attention rotates by position (llama).
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model::detail {

LayerKind token_embedding_layer_kind() {
  LayerKind kind;
  kind.name = "token_embedding";
  kind.footprint = [](const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query) {
    return embedding_footprint(model, spec, query, false);
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) -> std::unique_ptr<Layer<decltype(scalar)>> {
    const ModelSpec& model = build.model;
    const int t = build.env.collectives.size(Group::tensor);
    return std::make_unique<TokenEmbedding<decltype(scalar)>>(model.vocab, model.padded_vocab(t), model.context,
                                                              model.dim, build.name(), build.weight_stream(0),
                                                              build.env, model.tie_embeddings, false);
  });
  return kind;
}

}  // namespace kpipe::model::detail
