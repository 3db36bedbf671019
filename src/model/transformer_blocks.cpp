#include <cmath>

#include "kpipe/model/transformer_layers.hpp"
#include "random_streams.hpp"

namespace kpipe::model {

namespace {

constexpr double gpt2_std = 0.02;

config::InitKind init_kind(const ModelSpec& model) {
  return model.init == config::InitKind::automatic ? config::InitKind::gpt2 : model.init;
}

// Builds the Linear layers of global layer `index`, each from its own stream.
template <class Scalar>
class LinearFactory {
 public:
  LinearFactory(const ModelSpec& model, int index, KernelChoice kernels, LayerEnvironment env)
      : model_(model), index_(index), kernels_(kernels), env_(env) {}

  // `residual`: an output projection into the residual stream, whose GPT-2
  // initialisation shrinks with depth so the stream's variance stays bounded.
  std::unique_ptr<Layer<Scalar>> operator()(int in, int out, const std::string& part, bool residual = false) {
    const double std = residual ? gpt2_std / std::sqrt(2.0 * model_.blocks) : gpt2_std;
    const auto key = detail::stream(detail::Stream::weights, model_.seed, index_, next_++);
    return std::make_unique<Linear<Scalar>>(in, out, name(part), key, WeightInit::of(init_kind(model_), in, out, std),
                                            kernels_.gemm, env_);
  }

  std::string name(const std::string& part) const { return "layer" + std::to_string(index_) + "." + part; }

 private:
  const ModelSpec& model_;
  int index_;
  KernelChoice kernels_;
  LayerEnvironment env_;
  int next_ = 0;
};

template <class Scalar>
std::unique_ptr<Layer<Scalar>> chain(std::vector<std::unique_ptr<Layer<Scalar>>> layers, LayerEnvironment env) {
  return std::make_unique<Sequential<Scalar>>(std::move(layers), env);
}

}  // namespace

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_decoder_block(const ModelSpec& model, int index, KernelChoice kernels,
                                                  LayerEnvironment env) {
  const int d = model.dim;
  const int hidden = d * model.mlp_ratio;
  LinearFactory<Scalar> linear(model, index, kernels, env);
  std::vector<std::unique_ptr<Layer<Scalar>>> attention;
  attention.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("attn_norm"), env));
  attention.push_back(linear(d, 3 * d, "attn.qkv"));
  attention.push_back(
      std::make_unique<CausalSelfAttention<Scalar>>(model.heads, model.context, d, index, kernels, env));
  attention.push_back(linear(d, d, "attn.proj", true));
  std::vector<std::unique_ptr<Layer<Scalar>>> mlp;
  mlp.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("mlp_norm"), env));
  mlp.push_back(linear(d, hidden, "mlp.fc"));
  mlp.push_back(std::make_unique<ActivationLayer<Scalar>>(kernels::Activation::gelu, hidden, env));
  mlp.push_back(linear(hidden, d, "mlp.proj", true));
  std::vector<std::unique_ptr<Layer<Scalar>>> block;
  block.push_back(std::make_unique<Residual<Scalar>>(chain(std::move(attention), env), env));
  block.push_back(std::make_unique<Residual<Scalar>>(chain(std::move(mlp), env), env));
  return std::make_unique<PerPosition<Scalar>>(chain(std::move(block), env), model.context);
}

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_lm_head(const ModelSpec& model, int index, KernelChoice kernels,
                                            LayerEnvironment env) {
  LinearFactory<Scalar> linear(model, index, kernels, env);
  std::vector<std::unique_ptr<Layer<Scalar>>> head;
  head.push_back(std::make_unique<LayerNorm<Scalar>>(model.dim, linear.name("norm"), env));
  head.push_back(linear(model.dim, model.vocab, "lm_head"));
  return std::make_unique<PerPosition<Scalar>>(chain(std::move(head), env), model.context);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                         \
  template std::unique_ptr<Layer<Scalar>> make_decoder_block<Scalar>(const ModelSpec&, int, KernelChoice, \
                                                                     LayerEnvironment);                   \
  template std::unique_ptr<Layer<Scalar>> make_lm_head<Scalar>(const ModelSpec&, int, KernelChoice, LayerEnvironment);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::model
