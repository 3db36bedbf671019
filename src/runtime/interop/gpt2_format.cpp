// kpipe's transformer as Hugging Face's GPT-2 (transformers'
// GPT2LMHeadModel). The two compute the same function: pre-LayerNorm blocks
// with epsilon 1e-5, a fused Q|K|V projection whose heads sit side by side in
// each third, attention scaled by 1/sqrt(head width), learned positions, a
// final LayerNorm. GPT-2's Conv1D weights are input x output like kpipe's
// Linear; only the LM head (nn.Linear, output x input) is transposed. GPT-2
// has no LM head bias (kpipe: model.head_bias = false) and ties that head to
// the token embedding (tie_word_embeddings, kpipe's model.tie_embeddings);
// untied, the head is a tensor of its own.
#include <fmt/format.h>

#include <cmath>

#include "hf_config.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"
#include "kpipe/runtime/interop/hf_format.hpp"

namespace kpipe::runtime::hf {

using nlohmann::json;

namespace {

constexpr double layer_norm_epsilon = 1e-5;  // kpipe's LayerNorm

// The kpipe parameters of the transformer in checkpoint order, each with its GPT-2 twin.
std::vector<TensorMap> tensors(const config::ModelConfig& m) {
  const std::int64_t d = m.dim, hidden = std::int64_t{m.dim} * m.mlp_ratio;
  using L = TensorMap::Layout;
  // The embedding is layer 0: its token table (model::token_table_parameter) and positions.
  std::vector<TensorMap> out = {{model::token_table_parameter, m.vocab, d, L::matrix, {{"wte.weight"}}},
                                {"layer0.position", m.context, d, L::matrix, {{"wpe.weight"}}}};
  const auto norm = [&](const std::string& kpipe, const std::string& hf) {
    out.push_back({kpipe + ".gamma", 1, d, L::vector, {{hf + ".weight"}}});
    out.push_back({kpipe + ".beta", 1, d, L::vector, {{hf + ".bias"}}});
  };
  const auto linear = [&](const std::string& kpipe, const std::string& hf, std::int64_t in, std::int64_t outputs) {
    out.push_back({kpipe + ".weight", in, outputs, L::matrix, {{hf + ".weight"}}});
    out.push_back({kpipe + ".bias", 1, outputs, L::vector, {{hf + ".bias"}}});
  };
  for (int i = 0; i < m.blocks; ++i) {
    const std::string k = "layer" + std::to_string(i + 1) + ".", h = "h." + std::to_string(i) + ".";
    norm(k + "attn_norm", h + "ln_1");
    linear(k + "attn.qkv", h + "attn.c_attn", d, 3 * d);
    linear(k + "attn.proj", h + "attn.c_proj", d, d);
    norm(k + "mlp_norm", h + "ln_2");
    linear(k + "mlp.fc", h + "mlp.c_fc", d, hidden);
    linear(k + "mlp.proj", h + "mlp.c_proj", hidden, d);
  }
  const std::string head = "layer" + std::to_string(m.blocks + 1) + ".";
  norm(head + "norm", "ln_f");
  // Tied, the head is the token table (wte) itself.
  if (!m.tie_embeddings)
    out.push_back({head + "lm_head.weight", d, m.vocab, L::transposed, {{"lm_head.weight", 0, m.vocab}}});
  return out;
}

// GPT-2's activation_function names and kpipe's.
const std::map<std::string, config::ActivationKind> activations = {
    {"gelu", config::ActivationKind::gelu},
    {"gelu_new", config::ActivationKind::gelu_tanh},
    {"gelu_pytorch_tanh", config::ActivationKind::gelu_tanh},
    {"relu", config::ActivationKind::relu},
    {"tanh", config::ActivationKind::tanh}};

const char* hf_activation(config::ActivationKind kind) {
  switch (kind) {
    case config::ActivationKind::gelu:
      return "gelu";
    case config::ActivationKind::gelu_tanh:
      return "gelu_new";
    case config::ActivationKind::relu:
      return "relu";
    case config::ActivationKind::tanh:
      break;
  }
  return "tanh";
}

config::ModelConfig model_of(const json& config, const std::string& where) {
  const ConfigReader read(config, where, "a GPT-2 config.json");
  config::ModelConfig m;
  m.kind = "transformer";
  m.vocab = read.positive("vocab_size", 1 << 24);
  m.context = read.positive("n_positions", 1 << 16);
  m.dim = read.positive("n_embd", 1 << 16);
  m.blocks = read.positive("n_layer", 4096);
  m.heads = read.positive("n_head", 1024);
  m.head_bias = false;
  m.tie_embeddings = read.tied(true);
  if (m.dim % m.heads != 0) read.refuse(fmt::format("n_embd = {} is not a multiple of n_head = {}", m.dim, m.heads));
  m.mlp_ratio = 4;
  if (read.has("n_inner")) {
    const json& inner = read.at("n_inner");
    if (!inner.is_number_integer() || inner.get<std::int64_t>() % m.dim != 0 || inner.get<std::int64_t>() < m.dim ||
        inner.get<std::int64_t>() / m.dim > 64) {
      read.refuse(
          fmt::format("n_inner = {} is not n_embd = {} times 1 to 64; kpipe's MLP width is model.mlp_ratio "
                      "times the width",
                      inner.dump(), m.dim));
    }
    m.mlp_ratio = static_cast<int>(inner.get<std::int64_t>() / m.dim);
  }
  m.activation = config::ActivationKind::gelu_tanh;  // GPT2Config's default, gelu_new
  if (read.has("activation_function")) {
    const json& name = read.at("activation_function");
    const auto found = name.is_string() ? activations.find(name.get<std::string>()) : activations.end();
    if (found == activations.end()) {
      read.refuse(
          fmt::format("activation_function {} has no kpipe twin; kpipe computes gelu, gelu_new "
                      "(gelu_pytorch_tanh), relu and tanh",
                      name.dump()));
    }
    m.activation = found->second;
  }
  if (read.has("layer_norm_epsilon")) {
    const json& eps = read.at("layer_norm_epsilon");
    if (!eps.is_number() || std::abs(eps.get<double>() - layer_norm_epsilon) > 1e-12) {
      read.refuse(fmt::format("layer_norm_epsilon is {}; kpipe's LayerNorm uses 1e-05", eps.dump()));
    }
  }
  read.require("scale_attn_weights", true, "kpipe scales every score by 1/sqrt(head width)");
  read.require("scale_attn_by_inverse_layer_idx", false, "kpipe does not scale scores by layer");
  read.require("add_cross_attention", false, "kpipe's blocks have no cross-attention");
  return m;
}

json config_of(const config::ModelConfig& m) {
  if (!m.block.empty() && m.block != "decoder_block") {
    throw input_error(
        fmt::format("kpipe export writes GPT-2 models: the checkpoint's blocks are model.block = \"{}\", "
                    "not GPT-2's decoder_block",
                    m.block));
  }
  if (m.head_bias) {
    throw input_error(
        "kpipe export: GPT-2's LM head has no bias but the checkpoint's deck has model.head_bias = "
        "true; train with model.head_bias = false to export");
  }
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", m.vocab},
          {"n_positions", m.context},
          {"n_ctx", m.context},
          {"n_embd", m.dim},
          {"n_layer", m.blocks},
          {"n_head", m.heads},
          {"n_inner", m.dim * m.mlp_ratio},
          {"activation_function", hf_activation(m.activation)},
          {"layer_norm_epsilon", layer_norm_epsilon},
          {"tie_word_embeddings", m.tie_embeddings},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"torch_dtype", "float32"}};
}

std::string deck_keys(const config::ModelConfig& m) {
  return fmt::format(
      "model.kind = \"transformer\"\n"
      "model.vocab = {}\nmodel.context = {}\nmodel.dim = {}\nmodel.heads = {}\nmodel.layers = {}\n"
      "model.mlp_ratio = {}\nmodel.activation = \"{}\"\nmodel.head_bias = false\nmodel.tie_embeddings = {}\n",
      m.vocab, m.context, m.dim, m.heads, m.blocks, m.mlp_ratio, config::name_of(m.activation), m.tie_embeddings);
}

// GPT2Model's causal-mask buffers, which older transformers saved, are not weights.
bool ignored(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

}  // namespace

HfFormat gpt2_format() {
  return {"transformer", "gpt2", "GPT-2", "transformer.", model_of, config_of, tensors, ignored, deck_keys};
}

}  // namespace kpipe::runtime::hf
