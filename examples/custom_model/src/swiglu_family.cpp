#include "swiglu_family.hpp"

#include <fmt/format.h>

#include "kpipe/config/deck.hpp"
#include "kpipe/config/keys.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/core/error.hpp"

namespace custom {

using kpipe::config::ModelConfig;
using kpipe::config::PlannedLayer;
using kpipe::config::SplitWidth;

kpipe::config::ModelFamily swiglu_mlp_family() {
  kpipe::config::ModelFamily family;
  family.name = "swiglu_mlp";
  family.doc = "a residual MLP of SwiGLU blocks (examples/custom_model)";
  family.keys = {kpipe::config::keys::integer("model.swiglu_hidden", 128, 1, 1 << 20,
                                              "swiglu_mlp: the SwiGLU blocks' intermediate width")};
  family.block = "swiglu_block";
  // Reads kpipe's widths (model.input_dim, hidden, output_dim); its own key
  // is in model.values already.
  family.read = [](const kpipe::config::Deck& deck, ModelConfig& model) {
    model.input_dim = static_cast<int>(deck.integer("model.input_dim"));
    const auto& hidden = deck.integers("model.hidden");
    model.hidden.assign(hidden.begin(), hidden.end());
    model.output_dim = static_cast<int>(deck.integer("model.output_dim"));
    for (const int width : model.hidden) {
      if (width != model.hidden.front()) {
        throw kpipe::input_error(fmt::format("{}: SwiGLU blocks keep the width, so every hidden width must be the same",
                                             deck.describe("model.hidden")));
      }
    }
  };
  // An input projection, one block per hidden width, an output layer.
  family.layers = [](const ModelConfig& model) {
    if (model.hidden.empty()) throw kpipe::input_error("model.hidden is empty; a swiglu_mlp needs its block width");
    const int width = model.hidden.front();
    const PlannedLayer block = model.block.empty() ? PlannedLayer{"swiglu_block", width, width}
                                                   : PlannedLayer{model.block, width, width, "model.block"};
    std::vector<PlannedLayer> layers{{"linear", model.input_dim, width}};
    layers.insert(layers.end(), model.hidden.size(), block);
    layers.push_back({"linear", width, model.output_dim});
    return layers;
  };
  // W1 and W3 are column-parallel over the intermediate width, W2
  // row-parallel; the projections in and out stay whole.
  family.split_widths = [](const ModelConfig& model) -> std::vector<SplitWidth> {
    return {{"model.swiglu_hidden", static_cast<int>(model.integer("model.swiglu_hidden"))}};
  };
  return family;
}

}  // namespace custom
