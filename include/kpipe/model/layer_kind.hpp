#pragma once
// The registry of layer kinds: the one place that knows what a kind of layer
// is. A kind names itself, builds its layer from a LayerSpec and states its
// footprint (footprint.hpp), so stages, the memory estimate, the traffic
// prediction and the simulator need no switch over kinds. kpipe's own kinds
// register through the same call as a project's (docs/architecture.md,
// "Adding a layer"): describe the layer as data, build it only on the rank
// that holds it (DeepSpeed's LayerSpec, Megatron-core's ModuleSpec).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/model/footprint.hpp"
#include "kpipe/model/kernel_choice.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/tensor_split.hpp"
#include "kpipe/model/layers/weight_init.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

// What a kind's factory builds global layer `index` of `model` from. Its
// weights must depend only on (model.seed, index), never on the stage
// layout, so every partition builds the same model: draw them from
// weight_stream(position), one position per weight matrix.
struct LayerBuild {
  const ModelSpec& model;
  const LayerSpec& spec;
  int index;
  KernelChoice kernels;
  LayerEnvironment env;
  TensorSplit split;  // for kinds that pair (a kind's `pairs`); none otherwise

  // "layer<index>": the prefix of the layer's parameter names.
  std::string name() const { return "layer" + std::to_string(index); }
  // The counter-based stream of the layer's `position`-th weight matrix.
  std::uint64_t weight_stream(int position) const;
  // model.init for a fan_in x fan_out weight, `automatic` read as uniform.
  WeightInit init(int fan_in, int fan_out) const;
  // model.activation as the kernels name it.
  kernels::Activation activation() const;
};

template <class Scalar>
using LayerFactory = std::function<std::unique_ptr<Layer<Scalar>>(const LayerBuild&)>;

struct LayerKind {
  std::string name;  // as model builders and decks name it
  // A Linear-like layer: runs of consecutive pairing layers are split column
  // then row across the tensor group (tensor_splits); the rest split
  // themselves or stay whole.
  bool pairs = false;
  // Causal attention layers it holds, each with a KV cache when serving, and
  // the features of K (and of V) one token caches in each on one of
  // `tensor_ranks` ranks: model.dim / t with multi-head attention, the
  // rank's key/value heads · head width with grouped-query attention.
  int attention_layers = 0;
  std::function<int(const ModelSpec& model, int tensor_ranks)> kv_width;
  // What the layer of `spec` costs on one rank (footprint.hpp).
  std::function<LayerFootprint(const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query)> footprint;
  LayerFactory<float> make_float;
  LayerFactory<double> make_double;

  template <class Scalar>
  std::unique_ptr<Layer<Scalar>> make(const LayerBuild& build) const {
    if constexpr (std::is_same_v<Scalar, float>) {
      return make_float(build);
    } else {
      return make_double(build);
    }
  }
};

// Both factories of a kind from one generic callable
// `make(Scalar{}, const LayerBuild&) -> std::unique_ptr<Layer<Scalar>>`.
template <class Make>
void set_factories(LayerKind& kind, Make make) {
  kind.make_float = [make](const LayerBuild& build) { return make(float{}, build); };
  kind.make_double = [make](const LayerBuild& build) { return make(double{}, build); };
}

// Adds a kind, at start-up, before any deck is read. An input error when the
// name is empty or taken or a footprint or factory is missing. The reference
// stays valid for the process's life.
const LayerKind& register_layer_kind(LayerKind kind);
// The kind named `name`; an input error listing the registered kinds, which
// starts with `key` (the deck key that named it) when one is given.
const LayerKind& layer_kind(const std::string& name, const std::string& key = {});
// Every registered kind's name, built-ins first, in registration order.
std::vector<std::string> layer_kind_names();

// Global layer `index` of `model`, built by its kind. `split` is how a
// pairing layer is split across the tensor group (see tensor_splits).
template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_layer(const ModelSpec& model, int index, KernelChoice kernels, LayerEnvironment env,
                                          TensorSplit split = TensorSplit::none);

// The split of each layer of `layers` in a tensor group of `ranks`: runs of
// consecutive pairing layers pair up column then row, so the tensors between
// pairs, and at the stage's boundaries, are whole; an unpaired last one of a
// run stays whole. All none when ranks == 1.
std::vector<TensorSplit> tensor_splits(const ModelSpec& model, LayerRange layers, int ranks);

// The sum of the footprints of `layers` on one rank, each layer asked with
// its split and whether it is the model's first (`query.split` and
// `query.first_layer` are set per layer).
LayerFootprint layers_footprint(const ModelSpec& model, LayerRange layers, FootprintQuery query);

// Selective recomputation (pipeline.recompute = "selective") with the
// `attention` path: the forward FLOPs of one sample that B runs again in
// `layer`, and whether any layer of `model` saves less than without it (else
// it changes nothing, and a deck asking for it is told so).
std::int64_t selective_recompute_flops(const ModelSpec& model, const LayerSpec& layer,
                                       kernels::AttentionPath attention);
bool keeps_less_selectively(const ModelSpec& model, kernels::AttentionPath attention);

}  // namespace kpipe::model
