// "embedding": a transformer's token and position tables (TokenEmbedding),
// vocabulary-parallel over the tensor group.
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model::detail {

LayerFootprint embedding_footprint(const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query,
                                   bool learned_positions) {
  const std::int64_t t = query.tensor_ranks, rows = query.rows, in = spec.input_dim, out = spec.output_dim;
  LayerFootprint f;
  f.parameters =
      (model.padded_vocab(static_cast<int>(t)) / t + (learned_positions ? model.context : 0)) * std::int64_t{model.dim};
  f.forward_flops = rows * out;                    // the sum of the two tables
  f.saved = f.saved_in_scalar = rows * in;         // the token ids
  f.kept_for_weight_gradient = rows * (in + out);  // the ids and the (gathered) output gradient
  f.kept_in_scalar = rows * in;
  if (t > 1) {
    // The shards' lookups summed (reduce-scattered with sequence parallelism, whose B gathers dy's rows).
    f.tensor_forward = {rows * out, 1};
    if (query.sequence_parallel) f.tensor_backward = {rows * out / t, 1};
  }
  return f;
}

LayerKind embedding_layer_kind() {
  LayerKind kind;
  kind.name = "embedding";
  kind.footprint = [](const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query) {
    return embedding_footprint(model, spec, query, true);
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) -> std::unique_ptr<Layer<decltype(scalar)>> {
    const ModelSpec& model = build.model;
    const int t = build.env.collectives.size(Group::tensor);
    return std::make_unique<TokenEmbedding<decltype(scalar)>>(model.vocab, model.padded_vocab(t), model.context,
                                                              model.dim, build.name(), build.weight_stream(0),
                                                              build.env, model.tie_embeddings);
  });
  return kind;
}

}  // namespace kpipe::model::detail
