// "decoder_block": a pre-LayerNorm transformer block on rows x (T·dim)
// (make_decoder_block): heads and MLP columns split over the tensor group.
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model::detail {

LayerKind decoder_block_layer_kind() {
  LayerKind kind;
  kind.name = "decoder_block";
  kind.attention_layers = 1;
  kind.kv_width = [](const ModelSpec& model, int tensor_ranks) { return model.dim / tensor_ranks; };
  kind.footprint = [](const ModelSpec& model, const LayerSpec&, const FootprintQuery& query) {
    const std::int64_t T = model.context, d = model.dim, hidden = d * model.mlp_ratio;
    FootprintBuilder f(query, query.rows * T);
    const std::int64_t t = f.ranks();
    return f.layer_norm(d)
        .linear(d, 3 * d, TensorSplit::column)
        .attention(model.heads / t, T, d / model.heads, query.attention)
        .linear(d, d, TensorSplit::row)
        .layer_norm(d)
        .linear(d, hidden, TensorSplit::column)
        .elementwise(f.rows(), hidden / t)
        .linear(hidden, d, TensorSplit::row)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) {
    return make_decoder_block<decltype(scalar)>(build.model, build.index, build.kernels, build.env);
  });
  return kind;
}

}  // namespace kpipe::model::detail
