// "mlp" and "residual_mlp": feature vectors of model.input_dim through
// model.hidden widths to model.output_dim targets.
#include <fmt/format.h>

#include "builtin_families.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"

namespace kpipe::config::detail {

namespace {

std::vector<KeySpec> feature_keys() {
  const ModelConfig d;
  return {
      keys::integer("model.input_dim", d.input_dim, 1, limits::layer_width, "Features per sample"),
      keys::integers("model.hidden", d.hidden, 1,
                     "Hidden widths; mlp: one Linear layer each, residual_mlp: one block each (all equal)"),
      keys::integer("model.output_dim", d.output_dim, 1, limits::layer_width,
                    "Classes (classification) or targets (regression)"),
  };
}

void read_features(const Deck& deck, ModelConfig& model) {
  model.input_dim = static_cast<int>(deck.integer("model.input_dim"));
  const IntegerList& hidden = deck.integers("model.hidden");
  model.hidden.assign(hidden.begin(), hidden.end());
  model.output_dim = static_cast<int>(deck.integer("model.output_dim"));
}

// A spec assembled in code gets the deck schema's range checks here.
void check_widths(const ModelConfig& model) {
  if (model.input_dim < 1 || model.output_dim < 1) {
    throw input_error(fmt::format("model.input_dim = {} and model.output_dim = {} must both be >= 1", model.input_dim,
                                  model.output_dim));
  }
  for (const int width : model.hidden) {
    if (width < 1) throw input_error(fmt::format("model.hidden holds {}; every hidden width must be >= 1", width));
  }
}

// Each hidden width a column-parallel output and a row-parallel input.
std::vector<SplitWidth> hidden_widths(const ModelConfig& model) {
  std::vector<SplitWidth> widths;
  for (const int width : model.hidden) widths.push_back({"the hidden width of model.hidden", width});
  return widths;
}

}  // namespace

// One linear_activation layer per hidden width, then the linear output layer.
ModelFamily mlp_family() {
  ModelFamily family;
  family.name = "mlp";
  family.doc = "a plain MLP";
  family.keys = feature_keys();
  family.read = read_features;
  family.layers = [](const ModelConfig& model) {
    check_widths(model);
    std::vector<PlannedLayer> layers;
    int width = model.input_dim;
    for (const int next : model.hidden) {
      layers.push_back({"linear_activation", width, next});
      width = next;
    }
    layers.push_back({"linear", width, model.output_dim});
    return layers;
  };
  family.split_widths = hidden_widths;
  return family;
}

// A linear input projection, one residual block (LN -> Linear -> activation
// -> Linear -> +x) per hidden width, all equal, and a linear output layer.
ModelFamily residual_mlp_family() {
  ModelFamily family;
  family.name = "residual_mlp";
  family.doc = "residual MLP blocks (LN -> Linear -> GELU -> Linear -> +x)";
  family.keys = feature_keys();
  family.block = "residual_block";
  family.read = [](const Deck& deck, ModelConfig& model) {
    read_features(deck, model);
    if (model.hidden.empty()) {
      throw input_error(
          fmt::format("{}: a residual_mlp needs at least one hidden width", deck.describe("model.hidden")));
    }
    for (const int width : model.hidden) {
      if (width != model.hidden.front()) {
        throw input_error(
            fmt::format("{}: residual_mlp blocks add their input to their output, so every hidden width "
                        "must be the same (e.g. [{}, {}])",
                        deck.describe("model.hidden"), model.hidden.front(), model.hidden.front()));
      }
    }
  };
  family.layers = [](const ModelConfig& model) {
    check_widths(model);
    if (model.hidden.empty()) {
      throw input_error("model.hidden is empty; a residual_mlp needs at least one hidden width");
    }
    const int width = model.hidden.front();
    for (const int other : model.hidden) {
      if (other != width) {
        throw input_error(
            fmt::format("model.hidden holds {} and {}; residual_mlp blocks add their input to their "
                        "output, so every hidden width must be the same",
                        width, other));
      }
    }
    std::vector<PlannedLayer> layers{{"linear", model.input_dim, width}};
    for (std::size_t b = 0; b < model.hidden.size(); ++b) layers.push_back(repeated_block(model, width));
    layers.push_back({"linear", width, model.output_dim});
    return layers;
  };
  family.split_widths = hidden_widths;
  return family;
}

}  // namespace kpipe::config::detail
