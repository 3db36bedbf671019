// "residual_block": x + fc2(act(fc1(LN(x)))), the blocks of a residual MLP.
// It splits its own pair: fc1 column-, fc2 row-parallel, so the branch's
// output is whole again before the sum.
#include "builtin_layer_kinds.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/residual.hpp"
#include "kpipe/model/layers/sequential.hpp"

namespace kpipe::model::detail {

LayerKind residual_block_layer_kind() {
  LayerKind kind;
  kind.name = "residual_block";
  kind.footprint = [](const ModelSpec&, const LayerSpec& spec, const FootprintQuery& query) {
    const std::int64_t in = spec.input_dim, out = spec.output_dim;
    FootprintBuilder f(query, query.rows);
    return f.layer_norm(in)
        .linear(in, out, TensorSplit::column)
        .elementwise(f.rows(), out / f.ranks())
        .linear(out, out, TensorSplit::row)
        .footprint();
  };
  set_factories(kind, [](auto scalar, const LayerBuild& build) -> std::unique_ptr<Layer<decltype(scalar)>> {
    using Scalar = decltype(scalar);
    const int in = build.spec.input_dim, out = build.spec.output_dim;
    const std::string name = build.name();
    std::vector<std::unique_ptr<Layer<Scalar>>> parts;
    parts.push_back(std::make_unique<LayerNorm<Scalar>>(in, name + ".norm", build.env));
    auto fc1 = std::make_unique<Linear<Scalar>>(in, out, name + ".fc1", build.weight_stream(0), build.init(in, out),
                                                build.kernels, build.env, TensorSplit::column);
    const int width = fc1->output_dim();
    parts.push_back(std::move(fc1));
    parts.push_back(std::make_unique<ActivationLayer<Scalar>>(build.activation(), width, build.env));
    parts.push_back(std::make_unique<Linear<Scalar>>(out, out, name + ".fc2", build.weight_stream(1),
                                                     build.init(out, out), build.kernels, build.env, TensorSplit::row));
    return std::make_unique<Residual<Scalar>>(std::make_unique<Sequential<Scalar>>(std::move(parts), build.env),
                                              build.env);
  });
  return kind;
}

}  // namespace kpipe::model::detail
