// "linear_activation": a Linear then model.activation, the hidden layers of
// an MLP. It pairs like "linear"; the activation follows the Linear's share
// of the output (its columns when column-parallel).
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/sequential.hpp"

namespace kpipe::model::detail {

LayerKind linear_activation_layer_kind() {
  LayerKind kind;
  kind.name = "linear_activation";
  kind.pairs = true;
  kind.footprint = [](const ModelSpec&, const LayerSpec& spec, const FootprintQuery& query) {
    FootprintBuilder f(query, query.rows);
    f.linear(spec.input_dim, spec.output_dim, query.split, !query.first_layer);
    const bool column = f.ranks() > 1 && query.split == TensorSplit::column;
    return f.elementwise(column ? f.rows() : f.region_rows(), column ? spec.output_dim / f.ranks() : spec.output_dim)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) -> std::unique_ptr<Layer<decltype(scalar)>> {
    using Scalar = decltype(scalar);
    auto linear = pairing_linear<Scalar>(build);
    const int width = linear->output_dim();  // the rank's columns when column-parallel
    std::vector<std::unique_ptr<Layer<Scalar>>> parts;
    parts.push_back(std::move(linear));
    parts.push_back(std::make_unique<ActivationLayer<Scalar>>(build.activation(), width, build.env));
    return std::make_unique<Sequential<Scalar>>(std::move(parts), build.env);
  });
  return kind;
}

}  // namespace kpipe::model::detail
