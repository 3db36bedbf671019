// A layer kind registered from outside kpipe's sources, the way a project
// registers its own, reaches decks (model.block), the partition, stages, the
// footprint and the sequential trainer. The kind rebuilds a residual MLP
// block from public pieces with the same weight streams and names, so the
// built-in residual_block is the independent truth: bitwise the same weights
// after training, the same FLOPs and footprint.
#include <cstring>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/residual.hpp"
#include "kpipe/model/layers/sequential.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/training/trainer.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

template <class Scalar>
std::unique_ptr<Layer<Scalar>> pre_norm_block(const LayerBuild& build) {
  const int width = build.spec.input_dim;
  std::vector<std::unique_ptr<Layer<Scalar>>> branch;
  branch.push_back(std::make_unique<LayerNorm<Scalar>>(width, build.name() + ".norm", build.env));
  auto up = std::make_unique<Linear<Scalar>>(width, width, build.name() + ".fc1", build.weight_stream(0),
                                             build.init(width, width), build.kernels, build.env, TensorSplit::column);
  const int columns = up->output_dim();
  branch.push_back(std::move(up));
  branch.push_back(std::make_unique<ActivationLayer<Scalar>>(build.activation(), columns, build.env));
  branch.push_back(std::make_unique<Linear<Scalar>>(width, width, build.name() + ".fc2", build.weight_stream(1),
                                                    build.init(width, width), build.kernels, build.env,
                                                    TensorSplit::row));
  return std::make_unique<Residual<Scalar>>(std::make_unique<Sequential<Scalar>>(std::move(branch), build.env),
                                            build.env);
}

const LayerKind& project_kind() {
  static const LayerKind& kind = []() -> const LayerKind& {
    LayerKind k;
    k.name = "project_pre_norm_block";
    k.footprint = [](const ModelSpec&, const LayerSpec& spec, const FootprintQuery& query) {
      FootprintBuilder f(query, query.rows);
      return f.layer_norm(spec.input_dim)
          .linear(spec.input_dim, spec.input_dim, TensorSplit::column)
          .elementwise(f.rows(), spec.input_dim / f.ranks())
          .linear(spec.input_dim, spec.input_dim, TensorSplit::row)
          .footprint();
    };
    set_factories(k, [](auto scalar, const LayerBuild& build) { return pre_norm_block<decltype(scalar)>(build); });
    return register_layer_kind(std::move(k));
  }();
  return kind;
}

TrainerSpec spec_with_block(const std::string& block) {
  const std::string deck =
      "model.kind = \"residual_mlp\"\nmodel.input_dim = 12\nmodel.hidden = [16, 16, 16]\nmodel.output_dim = 5\n"
      "train.global_batch = 16\ntrain.microbatch_size = 4\n";
  return TrainerSpec::from_config(config::run_config(config::parse_deck(deck, "deck.toml", {"model.block=" + block})));
}

std::vector<float> trained(const TrainerSpec& spec) {
  tensor::ExecContext exec;
  SequentialTrainer<float> trainer(spec, exec);
  for (int s = 0; s < 3; ++s) trainer.step();
  return trainer.weights();
}

}  // namespace

TEST_CASE("a project's layer kind named by model.block trains like the built-in it rebuilds", "[model][layer_kind]") {
  const LayerKind& kind = project_kind();
  const TrainerSpec ours = spec_with_block("residual_block");
  const TrainerSpec theirs = spec_with_block(kind.name);
  const auto our_layers = ours.model.layers(), their_layers = theirs.model.layers();
  REQUIRE(their_layers.size() == our_layers.size());
  CHECK(their_layers[1].kind == &kind);
  for (std::size_t i = 0; i < our_layers.size(); ++i) CHECK(their_layers[i].flops == our_layers[i].flops);
  for (const int t : {1, 2}) {
    const FootprintQuery query{4, t, t > 1};
    const auto a = stage_footprint(ours.model, {0, 5}, query, false);
    const auto b = stage_footprint(theirs.model, {0, 5}, query, false);
    CHECK(a.parameters == b.parameters);
    CHECK(a.saved_per_microbatch == b.saved_per_microbatch);
    CHECK(a.kept_for_weight_gradient == b.kept_for_weight_gradient);
  }
  const auto expected = trained(ours), actual = trained(theirs);
  REQUIRE(actual.size() == expected.size());
  CHECK(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)) == 0);
}
