// "linear": Y = X W + b, the output layer of the MLPs. It pairs: a run of
// them splits column then row across the tensor group.
#include "builtin_layer_kinds.hpp"

namespace kpipe::model::detail {

LayerKind linear_layer_kind() {
  LayerKind kind;
  kind.name = "linear";
  kind.pairs = true;
  kind.footprint = [](const ModelSpec&, const LayerSpec& spec, const FootprintQuery& query) {
    return FootprintBuilder(query, query.rows)
        .linear(spec.input_dim, spec.output_dim, query.split, !query.first_layer)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) -> std::unique_ptr<Layer<decltype(scalar)>> {
    return pairing_linear<decltype(scalar)>(build);
  });
  return kind;
}

}  // namespace kpipe::model::detail
