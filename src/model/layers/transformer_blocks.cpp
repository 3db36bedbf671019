#include <cmath>

#include "../kernel_choices.hpp"
#include "../random_streams.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/residual.hpp"
#include "kpipe/model/layers/rotary_qkv.hpp"
#include "kpipe/model/layers/sequential.hpp"
#include "kpipe/model/layers/swiglu_layer.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

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
  // `biases`: whether its projections add one (GPT-2's do, Llama's not).
  LinearFactory(const ModelSpec& model, int index, KernelChoice kernels, LayerEnvironment env, bool biases = true)
      : model_(model), index_(index), kernels_(kernels), env_(env), biases_(biases) {}

  // A column-parallel projection of `blocks` fused blocks (Q|K|V: 3) over the tensor group.
  std::unique_ptr<Layer<Scalar>> column(int in, int out, const std::string& part, int blocks = 1) {
    return make(in, out, part, gpt2_std, TensorSplit::column, blocks, -1, biases_);
  }
  // A projection whole on every rank, each using part of its outputs.
  std::unique_ptr<Layer<Scalar>> replicated(int in, int out, const std::string& part) {
    return make(in, out, part, gpt2_std, TensorSplit::replicated, 1, -1, biases_);
  }
  // The LM projection onto the padded vocabulary, its padding masked.
  std::unique_ptr<Layer<Scalar>> logits(int in, const std::string& part, bool bias) {
    const int padded = model_.padded_vocab(env_.collectives.size(Group::tensor));
    return make(in, padded, part, gpt2_std, TensorSplit::column, 1, model_.vocab, bias);
  }
  // A row-parallel output projection into the residual stream, whose GPT-2
  // initialisation shrinks with depth so the stream's variance stays bounded.
  std::unique_ptr<Layer<Scalar>> row(int in, int out, const std::string& part) {
    return make(in, out, part, gpt2_std / std::sqrt(2.0 * model_.blocks), TensorSplit::row, 1, -1, biases_);
  }

  std::string name(const std::string& part) const { return "layer" + std::to_string(index_) + "." + part; }

 private:
  std::unique_ptr<Layer<Scalar>> make(int in, int out, const std::string& part, double std, TensorSplit split,
                                      int blocks, int real_outputs, bool bias) {
    const auto key = detail::stream(detail::Stream::weights, model_.seed, index_, next_++);
    const int fan_out = real_outputs == -1 ? out : real_outputs;
    return std::make_unique<Linear<Scalar>>(in, out, name(part), key,
                                            WeightInit::of(init_kind(model_), in, fan_out, std), kernels_, env_, split,
                                            blocks, real_outputs, bias);
  }

  const ModelSpec& model_;
  int index_;
  KernelChoice kernels_;
  LayerEnvironment env_;
  bool biases_;
  int next_ = 0;
};

// The LM projection as a copy of the token table: its layout (padded vocab x
// dim, vocabulary rows split over the tensor group), its values (the
// embedding's stream at layer 0), no bias.
template <class Scalar>
std::unique_ptr<Layer<Scalar>> tied_logits(const ModelSpec& model, const std::string& name, KernelChoice kernels,
                                           LayerEnvironment env) {
  const int padded = model.padded_vocab(env.collectives.size(Group::tensor));
  const auto key = kernels::stream_key(detail::stream(detail::Stream::weights, model.seed, 0, 0), 0);
  auto head =
      std::make_unique<Linear<Scalar>>(model.dim, padded, name, key, WeightInit{true, gpt2_std}, kernels, env,
                                       TensorSplit::column, 1, model.vocab, false, WeightLayout::output_by_input);
  head->tie(token_table_parameter);
  return head;
}

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
  // Megatron-LM: each tensor rank holds heads/t heads and hidden/t MLP columns;
  // the LayerNorms and the residual stream are whole on every rank.
  const int t = env.collectives.size(Group::tensor);
  LinearFactory<Scalar> linear(model, index, kernels, env);
  std::vector<std::unique_ptr<Layer<Scalar>>> attention;
  attention.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("attn_norm"), env));
  attention.push_back(linear.column(d, 3 * d, "attn.qkv", 3));
  attention.push_back(
      std::make_unique<CausalSelfAttention<Scalar>>(model.heads / t, model.context, d / t, index, kernels, env));
  attention.push_back(linear.row(d, d, "attn.proj"));
  std::vector<std::unique_ptr<Layer<Scalar>>> mlp;
  mlp.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("mlp_norm"), env));
  mlp.push_back(linear.column(d, hidden, "mlp.fc"));
  mlp.push_back(std::make_unique<ActivationLayer<Scalar>>(detail::activation(model.activation), hidden / t, env));
  mlp.push_back(linear.row(hidden, d, "mlp.proj"));
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
  // Vocabulary-parallel logits: the loss never gathers them (vocab_parallel_cross_entropy).
  head.push_back(model.tie_embeddings ? tied_logits<Scalar>(model, linear.name("lm_head"), kernels, env)
                                      : linear.logits(model.dim, "lm_head", model.head_bias));
  return std::make_unique<PerPosition<Scalar>>(chain(std::move(head), env), model.context);
}

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_llama_block(const ModelSpec& model, int index, KernelChoice kernels,
                                                LayerEnvironment env) {
  const int d = model.dim, heads = model.heads, head_dim = d / heads;
  const int kv_heads = static_cast<int>(model.integer("model.kv_heads"));
  const int ffn = static_cast<int>(model.integer("model.ffn_dim"));
  const NormSpec norm{Normalisation::rms, model.real("model.norm_eps")};
  const int t = env.collectives.size(Group::tensor);
  LinearFactory<Scalar> linear(model, index, kernels, env, false);
  std::vector<std::unique_ptr<Layer<Scalar>>> attention;
  attention.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("attn_norm"), env, norm));
  // Whole groups [its query heads | K | V] side by side: a plain column split
  // gives each rank kv_heads/t of them. With more ranks than groups (t a
  // multiple of kv_heads) every rank holds the whole projection and attends
  // with its heads/t query heads, which share one group's K and V.
  const int grouped = kv_heads * (heads / kv_heads + 2) * head_dim;
  const bool shared = t > kv_heads;
  attention.push_back(shared ? linear.replicated(d, grouped, "attn.qkv") : linear.column(d, grouped, "attn.qkv"));
  const kernels::RotaryShape rotary{model.context,
                                    shared ? kv_heads : kv_heads / t,
                                    heads / kv_heads,
                                    head_dim,
                                    shared ? env.collectives.rank(Group::tensor) * (heads / t) : 0,
                                    shared ? heads / t : 0};
  attention.push_back(std::make_unique<RotaryQKV<Scalar>>(rotary, model.real("model.rope_theta"), env));
  attention.push_back(
      std::make_unique<CausalSelfAttention<Scalar>>(heads / t, model.context, d / t, index, kernels, env));
  attention.push_back(linear.row(d, d, "attn.proj"));
  std::vector<std::unique_ptr<Layer<Scalar>>> mlp;
  mlp.push_back(std::make_unique<LayerNorm<Scalar>>(d, linear.name("mlp_norm"), env, norm));
  mlp.push_back(linear.column(d, 2 * ffn, "mlp.gate_up", 2));
  mlp.push_back(std::make_unique<SwiGLU<Scalar>>(ffn / t, env));
  mlp.push_back(linear.row(ffn, d, "mlp.down"));
  std::vector<std::unique_ptr<Layer<Scalar>>> block;
  block.push_back(std::make_unique<Residual<Scalar>>(chain(std::move(attention), env), env));
  block.push_back(std::make_unique<Residual<Scalar>>(chain(std::move(mlp), env), env));
  return std::make_unique<PerPosition<Scalar>>(chain(std::move(block), env), model.context);
}

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_llama_head(const ModelSpec& model, int index, KernelChoice kernels,
                                               LayerEnvironment env) {
  LinearFactory<Scalar> linear(model, index, kernels, env, false);
  std::vector<std::unique_ptr<Layer<Scalar>>> head;
  head.push_back(std::make_unique<LayerNorm<Scalar>>(model.dim, linear.name("norm"), env,
                                                     NormSpec{Normalisation::rms, model.real("model.norm_eps")}));
  head.push_back(model.tie_embeddings ? tied_logits<Scalar>(model, linear.name("lm_head"), kernels, env)
                                      : linear.logits(model.dim, "lm_head", false));
  return std::make_unique<PerPosition<Scalar>>(chain(std::move(head), env), model.context);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                      \
  template std::unique_ptr<Layer<Scalar>> make_decoder_block<Scalar>(const ModelSpec&, int, KernelChoice,              \
                                                                     LayerEnvironment);                                \
  template std::unique_ptr<Layer<Scalar>> make_lm_head<Scalar>(const ModelSpec&, int, KernelChoice, LayerEnvironment); \
  template std::unique_ptr<Layer<Scalar>> make_llama_block<Scalar>(const ModelSpec&, int, KernelChoice,                \
                                                                   LayerEnvironment);                                  \
  template std::unique_ptr<Layer<Scalar>> make_llama_head<Scalar>(const ModelSpec&, int, KernelChoice,                 \
                                                                  LayerEnvironment);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::model
