#include "kpipe/model/spec.hpp"

#include "kpipe/model/layer_kind.hpp"

namespace kpipe::model {

std::int64_t training_flops_per_sample(const ModelSpec& model) {
  std::int64_t forward = 0;
  for (const LayerSpec& layer : model.layers()) forward += forward_flops(layer);
  return 3 * forward;
}

// The family's plan, each layer's kind resolved and its FLOPs from the kind's
// own footprint.
std::vector<LayerSpec> ModelSpec::layers() const {
  std::vector<LayerSpec> out;
  for (const config::PlannedLayer& planned : family().layers(*this)) {
    LayerSpec layer{&layer_kind(planned.kind, planned.chosen_by), planned.input_dim, planned.output_dim};
    layer.flops = layer.kind->footprint(*this, layer, FootprintQuery{}).forward_flops;
    out.push_back(layer);
  }
  return out;
}

}  // namespace kpipe::model
