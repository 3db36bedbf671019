// "llama_head": the final RMSNorm and the LM projection without bias
// (make_llama_head), column-parallel over the vocabulary.
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model::detail {

LayerKind llama_head_layer_kind() {
  LayerKind kind;
  kind.name = "llama_head";
  kind.footprint = [](const ModelSpec& model, const LayerSpec&, const FootprintQuery& query) {
    return FootprintBuilder(query, query.rows * std::int64_t{model.context})
        .rms_norm(model.dim)
        .linear(model.dim, model.padded_vocab(query.tensor_ranks), TensorSplit::column, true, false)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) {
    return make_llama_head<decltype(scalar)>(build.model, build.index, build.kernels, build.env);
  });
  return kind;
}

}  // namespace kpipe::model::detail
