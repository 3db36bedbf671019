#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/model/layer_kinds.hpp"
#include "kpipe/model/transformer_layers.hpp"
#include "random_streams.hpp"

namespace kpipe::model {

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_layer(const ModelSpec& model, int index, KernelChoice kernels, LayerEnvironment env,
                                          TensorSplit split) {
  const auto layers = model.layers();
  if (index < 0 || index >= static_cast<int>(layers.size())) {
    throw input_error(fmt::format("layer {} does not exist; the model has layers 0 to {}", index, layers.size() - 1));
  }
  const LayerSpec& spec = layers[index];
  const std::string name = "layer" + std::to_string(index);
  // Each Linear of the layer draws from its own stream of (seed, layer).
  const auto key = [&](int position) { return detail::stream(detail::Stream::weights, model.seed, index, position); };
  const auto gemm = kernels.gemm;
  const auto init = [&](int in, int out) {
    return WeightInit::of(model.init == config::InitKind::automatic ? config::InitKind::uniform : model.init, in, out);
  };
  std::vector<std::unique_ptr<Layer<Scalar>>> parts;
  switch (spec.kind) {
    case LayerKind::linear:
      return std::make_unique<Linear<Scalar>>(spec.input_dim, spec.output_dim, name, key(0),
                                              init(spec.input_dim, spec.output_dim), gemm, env, split);
    case LayerKind::linear_activation: {
      auto linear = std::make_unique<Linear<Scalar>>(spec.input_dim, spec.output_dim, name, key(0),
                                                     init(spec.input_dim, spec.output_dim), gemm, env, split);
      const int width = linear->output_dim();  // the rank's columns when column-parallel
      parts.push_back(std::move(linear));
      parts.push_back(std::make_unique<ActivationLayer<Scalar>>(model.activation, width, env));
      return std::make_unique<Sequential<Scalar>>(std::move(parts), env);
    }
    case LayerKind::residual_block: {
      // fc1 column-parallel, fc2 row-parallel: the branch's output is whole again before the sum.
      parts.push_back(std::make_unique<LayerNorm<Scalar>>(spec.input_dim, name + ".norm", env));
      auto fc1 =
          std::make_unique<Linear<Scalar>>(spec.input_dim, spec.output_dim, name + ".fc1", key(0),
                                           init(spec.input_dim, spec.output_dim), gemm, env, TensorSplit::column);
      const int width = fc1->output_dim();
      parts.push_back(std::move(fc1));
      parts.push_back(std::make_unique<ActivationLayer<Scalar>>(model.activation, width, env));
      parts.push_back(std::make_unique<Linear<Scalar>>(spec.output_dim, spec.output_dim, name + ".fc2", key(1),
                                                       init(spec.output_dim, spec.output_dim), gemm, env,
                                                       TensorSplit::row));
      return std::make_unique<Residual<Scalar>>(std::make_unique<Sequential<Scalar>>(std::move(parts), env), env);
    }
    case LayerKind::embedding:
      return std::make_unique<TokenEmbedding<Scalar>>(model.vocab, model.context, model.dim, name, key(0), env);
    case LayerKind::decoder_block:
      return make_decoder_block<Scalar>(model, index, kernels, env);
    case LayerKind::lm_head:
      return make_lm_head<Scalar>(model, index, kernels, env);
  }
  throw input_error(fmt::format("layer {} has an unknown kind", index));
}

std::vector<TensorSplit> tensor_splits(const ModelSpec& model, LayerRange layers, int ranks) {
  const auto specs = model.layers();
  const auto linear = [&](int index) {
    return index < layers.end() &&
           (specs[index].kind == LayerKind::linear || specs[index].kind == LayerKind::linear_activation);
  };
  std::vector<TensorSplit> splits;
  for (int index = layers.first; index < layers.end(); ++index) {
    const bool pairs = ranks > 1 && linear(index) && linear(index + 1);
    splits.push_back(pairs ? TensorSplit::column : TensorSplit::none);
    if (pairs) {
      splits.push_back(TensorSplit::row);
      ++index;
    }
  }
  return splits;
}

template std::unique_ptr<Layer<float>> make_layer<float>(const ModelSpec&, int, KernelChoice, LayerEnvironment,
                                                         TensorSplit);
template std::unique_ptr<Layer<double>> make_layer<double>(const ModelSpec&, int, KernelChoice, LayerEnvironment,
                                                           TensorSplit);

}  // namespace kpipe::model
