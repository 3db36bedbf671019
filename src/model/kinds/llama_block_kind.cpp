// "llama_block": RMSNorm, grouped-query attention with rotary positions and
// a SwiGLU MLP on rows x (T·dim) (make_llama_block): query heads, key/value
// groups and MLP columns split over the tensor group (the grouped projection
// replicated where t exceeds model.kv_heads).
#include <algorithm>

#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model::detail {

LayerKind llama_block_layer_kind() {
  LayerKind kind;
  kind.name = "llama_block";
  kind.attention_layers = 1;
  // A rank holds kv_heads / t key/value heads, or one shared by t / kv_heads ranks.
  kind.kv_width = [](const ModelSpec& model, int tensor_ranks) {
    const int kv_heads = static_cast<int>(model.integer("model.kv_heads"));
    return std::max(kv_heads / tensor_ranks, 1) * (model.dim / model.heads);
  };
  kind.footprint = [](const ModelSpec& model, const LayerSpec&, const FootprintQuery& query) {
    const std::int64_t T = model.context, d = model.dim, heads = model.heads, head_dim = d / heads;
    const std::int64_t kv_heads = model.integer("model.kv_heads"), ffn = model.integer("model.ffn_dim");
    FootprintBuilder f(query, query.rows * T);
    const std::int64_t t = f.ranks();
    return f.rms_norm(d)
        .linear(d, kv_heads * (heads / kv_heads + 2) * head_dim,
                t > kv_heads ? TensorSplit::replicated : TensorSplit::column, true, false)
        .unsaved(3 * d / t)  // the rotated, repeated Q|K|V
        .attention(heads / t, T, head_dim, query.attention)
        .linear(d, d, TensorSplit::row, true, false)
        .rms_norm(d)
        .linear(d, 2 * ffn, TensorSplit::column, true, false)
        .elementwise(f.rows(), 2 * ffn / t)  // SwiGLU saves its input, both halves
        .linear(ffn, d, TensorSplit::row, true, false)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) {
    return make_llama_block<decltype(scalar)>(build.model, build.index, build.kernels, build.env);
  });
  return kind;
}

}  // namespace kpipe::model::detail
