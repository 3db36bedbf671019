#include "kpipe/model/layer_kind.hpp"

#include <fmt/format.h>

#include "kernel_choices.hpp"
#include "kinds/builtin_layer_kinds.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/registry.hpp"
#include "kpipe/core/strings.hpp"
#include "random_streams.hpp"

namespace kpipe::model {

namespace {

void check_complete(const LayerKind& kind) {
  if (!kind.footprint || !kind.make_float || !kind.make_double) {
    throw input_error(
        fmt::format("layer kind \"{}\" needs a footprint and a factory for float and double "
                    "(model::set_factories sets both)",
                    kind.name));
  }
  if (kind.attention_layers > 0 && !kind.kv_width) {
    throw input_error(fmt::format(
        "layer kind \"{}\" holds attention layers but no kv_width: the features its KV cache keeps per token",
        kind.name));
  }
}

Registry<LayerKind>& registry() {
  static Registry<LayerKind> kinds("layer kind", check_complete, detail::builtin_layer_kinds());
  return kinds;
}

}  // namespace

std::uint64_t LayerBuild::weight_stream(int position) const {
  return detail::stream(detail::Stream::weights, model.seed, index, position);
}

WeightInit LayerBuild::init(int fan_in, int fan_out) const {
  return WeightInit::of(model.init == config::InitKind::automatic ? config::InitKind::uniform : model.init, fan_in,
                        fan_out);
}

kernels::Activation LayerBuild::activation() const { return detail::activation(model.activation); }

const LayerKind& register_layer_kind(LayerKind kind) { return registry().add(std::move(kind)); }

const LayerKind& layer_kind(const std::string& name, const std::string& key) { return registry().at(name, key); }

std::vector<std::string> layer_kind_names() { return registry().names(); }

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_layer(const ModelSpec& model, int index, KernelChoice kernels, LayerEnvironment env,
                                          TensorSplit split) {
  const auto layers = model.layers();
  if (index < 0 || index >= static_cast<int>(layers.size())) {
    throw input_error(fmt::format("layer {} does not exist; the model has layers 0 to {}", index, layers.size() - 1));
  }
  const LayerSpec& spec = layers[index];
  return spec.kind->make<Scalar>({model, spec, index, kernels, env, split});
}

std::vector<TensorSplit> tensor_splits(const ModelSpec& model, LayerRange layers, int ranks) {
  const auto specs = model.layers();
  const auto pairs = [&](int index) { return index < layers.end() && specs[index].kind->pairs; };
  std::vector<TensorSplit> splits;
  for (int index = layers.first; index < layers.end(); ++index) {
    const bool paired = ranks > 1 && pairs(index) && pairs(index + 1);
    splits.push_back(paired ? TensorSplit::column : TensorSplit::none);
    if (paired) {
      splits.push_back(TensorSplit::row);
      ++index;
    }
  }
  return splits;
}

LayerFootprint layers_footprint(const ModelSpec& model, LayerRange layers, FootprintQuery query) {
  const auto specs = model.layers();
  const auto splits = tensor_splits(model, layers, query.tensor_ranks);
  LayerFootprint sum;
  for (int index = layers.first; index < layers.end(); ++index) {
    const LayerSpec& spec = specs.at(static_cast<std::size_t>(index));
    query.split = splits[index - layers.first];
    query.first_layer = index == 0;
    sum += spec.kind->footprint(model, spec, query);
  }
  return sum;
}

std::int64_t selective_recompute_flops(const ModelSpec& model, const LayerSpec& layer,
                                       kernels::AttentionPath attention) {
  FootprintQuery query;
  query.attention = attention;
  query.selective_recompute = true;
  return layer.kind->footprint(model, layer, query).recompute_flops;
}

bool keeps_less_selectively(const ModelSpec& model, kernels::AttentionPath attention) {
  FootprintQuery query;
  query.attention = attention;
  const LayerRange all{0, model.layer_count()};
  const std::int64_t kept = layers_footprint(model, all, query).saved;
  query.selective_recompute = true;
  return layers_footprint(model, all, query).saved < kept;
}

template std::unique_ptr<Layer<float>> make_layer<float>(const ModelSpec&, int, KernelChoice, LayerEnvironment,
                                                         TensorSplit);
template std::unique_ptr<Layer<double>> make_layer<double>(const ModelSpec&, int, KernelChoice, LayerEnvironment,
                                                           TensorSplit);

}  // namespace kpipe::model
