// Model description from decks, its layer count against config's, and partitions.
#include <string>

#include "catch.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/partition.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {
std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the model's layers are the ones config counts", "[model][spec]") {
  const auto text = GENERATE(std::string("model.kind = \"mlp\"\nmodel.hidden = [8, 16, 4]\n"),
                             std::string("model.kind = \"mlp\"\nmodel.hidden = []\n"),
                             std::string("model.kind = \"residual_mlp\"\nmodel.hidden = [8, 8]\n"),
                             std::string("model.kind = \"residual_mlp\"\nmodel.hidden = [32]\nmodel.input_dim = 3\n"));
  const auto deck = config::parse_deck(text + "pipeline.stages = 1\n", "deck.toml");
  const config::RunConfig config = config::run_config(deck);
  const auto spec = ModelSpec::from_config(config.model);
  CHECK(spec.layer_count() == config.layers);
  const auto layers = spec.layers();
  CHECK(layers.front().input_dim == spec.input_dim);
  CHECK(layers.back().output_dim == spec.output_dim);
  CHECK(layers.back().kind->name == "linear");
  for (std::size_t i = 1; i < layers.size(); ++i) CHECK(layers[i].input_dim == layers[i - 1].output_dim);
}

TEST_CASE("a residual_mlp needs equal hidden widths", "[model][spec]") {
  ModelSpec spec;
  spec.kind = "residual_mlp";
  spec.input_dim = 4;
  spec.output_dim = 2;
  spec.hidden = {8, 6};
  CHECK(input_error_of([&] { spec.layers(); }) ==
        "model.hidden holds 8 and 6; residual_mlp blocks add their input to their output, so every hidden width must "
        "be the same");
}

TEST_CASE("the default partition balances forward FLOPs", "[model][partition]") {
  ModelSpec spec;  // quickstart: 64 -> 256 x 4 -> 10
  spec.input_dim = 64;
  spec.hidden = {256, 256, 256, 256};
  spec.output_dim = 10;
  // Layer FLOPs are 1, 4, 4, 4, 0.16 (units of 2 * 64 * 256): the best split
  // into two puts the light first and last layers with two heavy ones each.
  CHECK(partition_layers(spec, 2) == std::vector<LayerRange>{{0, 2}, {2, 3}});
  CHECK(partition_layers(spec, 5) == std::vector<LayerRange>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}});
  CHECK(partition_layers(spec, 1) == std::vector<LayerRange>{{0, 5}});
  // Equal layers split evenly, extra layers going to the earlier stages.
  spec.hidden = {64, 64, 64, 64, 64};
  spec.input_dim = 64;
  spec.output_dim = 64;
  CHECK(partition_layers(spec, 4) == std::vector<LayerRange>{{0, 2}, {2, 2}, {4, 1}, {5, 1}});
}

TEST_CASE("an explicit partition is used as given and checked", "[model][partition]") {
  ModelSpec spec;
  spec.input_dim = 8;
  spec.hidden = {8, 8, 8};
  spec.output_dim = 2;
  CHECK(partition_layers(spec, 2, {3, 1}) == std::vector<LayerRange>{{0, 3}, {3, 1}});
  CHECK(input_error_of([&] {
          partition_layers(spec, 2, {2, 1});
        }) ==
        "the partition [2, 1] must give every stage at least one layer and sum to the 4 layers of the model, but sums "
        "to 3");
  CHECK(input_error_of([&] { partition_layers(spec, 2, {4, 0}); }).find("at least one layer") != std::string::npos);
  CHECK(input_error_of([&] {
          partition_layers(spec, 3, {2, 2});
        }) == "the partition has 2 entries but there are 3 model stages; give one layer count per stage");
  CHECK(input_error_of([&] { partition_layers(spec, 5); }) ==
        "5 model stages cannot split a model of 4 layers; use between 1 and 4 stages");
}

TEST_CASE("a run's partition covers p * v stages", "[model][partition]") {
  const auto deck = config::parse_deck(
      "model.hidden = [16, 16, 16, 16, 16, 16, 16]\npipeline.stages = 2\npipeline.virtual_stages = 2\n"
      "pipeline.schedule = \"interleaved\"\npipeline.partition = [1, 3, 2, 2]\n",
      "deck.toml");
  CHECK(partition_layers(config::run_config(deck)) == std::vector<LayerRange>{{0, 1}, {1, 3}, {4, 2}, {6, 2}});
}
