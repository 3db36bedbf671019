#pragma once
// What model a deck describes: its family's configuration (model.*) and the
// list of its partitionable layers, which the family plans
// (config::ModelFamily::layers) and the layer kinds resolve.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"

namespace kpipe::model {

using config::LossKind;

struct LayerKind;  // layer_kind.hpp: the registry of kinds

// The partition unit, built by its kind (layer_kind.hpp) as the family
// planned it. Widths are per sample: a transformer's layers see T positions
// per sample, so its block is T·dim -> T·dim. `flops` is the forward FLOPs of
// one sample.
struct LayerSpec {
  const LayerKind* kind = nullptr;
  int input_dim = 0;
  int output_dim = 0;
  std::int64_t flops = 0;
};

// The model section of a run configuration, and the layers it plans. A spec
// assembled in code (tests, a project's driver) sets the family's fields as a
// deck would, `kind` first.
struct ModelSpec : config::ModelConfig {
  // The model of a run configuration.
  static ModelSpec from_config(const config::ModelConfig& config) { return ModelSpec{config}; }

  // Global layer L is layers()[L]. Throws an input error for an invalid model
  // (a residual_mlp without hidden widths or with unequal ones).
  std::vector<LayerSpec> layers() const;
  int layer_count() const { return static_cast<int>(layers().size()); }
};

// Forward FLOPs of one sample through a layer, as its kind states them
// (LayerFootprint::forward_flops).
inline std::int64_t forward_flops(const LayerSpec& layer) { return layer.flops; }

// The model FLOPs of one sample's training step: its forward, and the input
// and weight gradients at twice that (3 x forward, as Megatron-LM and MFU
// figures count them; recomputation's repeated work is not model FLOPs).
std::int64_t training_flops_per_sample(const ModelSpec& model);

}  // namespace kpipe::model
