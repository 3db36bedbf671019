#include "kpipe/runtime/gpt2_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "kpipe/core/error.hpp"
#include "kpipe/model/transformer_layers.hpp"

namespace kpipe::runtime::gpt2 {

using nlohmann::json;

namespace {

// One parameter on both sides: kpipe's rows x cols matrix and GPT-2's tensor,
// a vector (LayerNorms, biases: shape [cols]) or the transpose (the LM head).
struct Pair {
  std::string kpipe;
  std::string hf;  // without the "transformer." prefix of GPT2LMHeadModel's body
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  enum class Layout { matrix, vector, transposed } layout = Layout::matrix;

  std::vector<std::int64_t> hf_shape() const {
    switch (layout) {
      case Layout::vector:
        return {cols};
      case Layout::transposed:
        return {cols, rows};
      case Layout::matrix:
        break;
    }
    return {rows, cols};
  }
};

constexpr const char* body_prefix = "transformer.";
constexpr double layer_norm_epsilon = 1e-5;  // kpipe's LayerNorm

// The kpipe parameters of the transformer in checkpoint order, each with its GPT-2 twin.
std::vector<Pair> pairs(const config::ModelConfig& m) {
  const std::int64_t d = m.dim, hidden = std::int64_t{m.dim} * m.mlp_ratio;
  using L = Pair::Layout;
  // The embedding is layer 0: its token table (model::token_table_parameter) and positions.
  std::vector<Pair> out = {{model::token_table_parameter, "wte.weight", m.vocab, d},
                           {"layer0.position", "wpe.weight", m.context, d}};
  const auto norm = [&](const std::string& kpipe, const std::string& hf) {
    out.push_back({kpipe + ".gamma", hf + ".weight", 1, d, L::vector});
    out.push_back({kpipe + ".beta", hf + ".bias", 1, d, L::vector});
  };
  const auto linear = [&](const std::string& kpipe, const std::string& hf, std::int64_t in, std::int64_t outputs) {
    out.push_back({kpipe + ".weight", hf + ".weight", in, outputs});
    out.push_back({kpipe + ".bias", hf + ".bias", 1, outputs, L::vector});
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
  if (!m.tie_embeddings) out.push_back({head + "lm_head.weight", "lm_head.weight", d, m.vocab, L::transposed});
  return out;
}

bool is_head(const Pair& pair) { return pair.hf == "lm_head.weight"; }

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

class ConfigReader {
 public:
  ConfigReader(const json& config, std::string where) : config_(config), where_(std::move(where)) {}

  [[noreturn]] void refuse(const std::string& why) const { throw input_error(fmt::format("{}: {}", where_, why)); }

  int positive(const char* key, int most) const {
    if (!config_.contains(key)) refuse(fmt::format("has no \"{}\"; a GPT-2 config.json names it", key));
    const json& value = config_[key];
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > most) {
      refuse(fmt::format("\"{}\" is {}, not an integer from 1 to {}", key, value.dump(), most));
    }
    return value.get<int>();
  }

  // A key that must hold `expected` (or be absent, when that is GPT-2's default).
  void require(const char* key, const json& expected, const char* why) const {
    if (config_.contains(key) && !config_[key].is_null() && config_[key] != expected) {
      refuse(fmt::format("\"{}\" is {}; kpipe needs {} ({})", key, config_[key].dump(), expected.dump(), why));
    }
  }

  const json& at(const char* key) const { return config_[key]; }
  bool has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }

 private:
  const json& config_;
  std::string where_;
};

// Whether config.json ties the LM head to the token embedding (GPT-2's default).
bool tied(const json& config) {
  return !config.contains("tie_word_embeddings") || config["tie_word_embeddings"] != false;
}

}  // namespace

config::ModelConfig model_of(const json& config, const std::string& where) {
  const ConfigReader read(config, where);
  if (!config.is_object()) read.refuse("is not a JSON object");
  if (!read.has("model_type") || read.at("model_type") != "gpt2") {
    read.refuse(fmt::format("model_type is {}; kpipe import reads GPT-2 (\"gpt2\") models",
                            read.has("model_type") ? read.at("model_type").dump() : "missing"));
  }
  config::ModelConfig m;
  m.kind = "transformer";
  m.vocab = read.positive("vocab_size", 1 << 24);
  m.context = read.positive("n_positions", 1 << 16);
  m.dim = read.positive("n_embd", 1 << 16);
  m.blocks = read.positive("n_layer", 4096);
  m.heads = read.positive("n_head", 1024);
  m.head_bias = false;
  m.tie_embeddings = tied(config);
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
  if (m.kind != "transformer") {
    throw input_error(
        "kpipe export writes GPT-2 models: the checkpoint's deck has model.kind other than "
        "\"transformer\"");
  }
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

std::vector<io::ModelShape> parameter_shapes(const config::ModelConfig& model) {
  std::vector<io::ModelShape> shapes;
  for (const Pair& pair : pairs(model)) shapes.push_back({pair.kpipe, pair.rows, pair.cols});
  return shapes;
}

namespace {

io::HostTensor transposed(const io::HostTensor& in, std::int64_t rows, std::int64_t cols) {
  io::HostTensor out{{cols, rows}, std::vector<float>(in.values.size())};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out.values[c * rows + r] = in.values[r * cols + c];
  }
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

std::map<std::string, io::HostTensor> to_gpt2(const config::ModelConfig& model,
                                              const std::map<std::string, io::HostTensor>& parameters) {
  std::map<std::string, io::HostTensor> out;
  for (const Pair& pair : pairs(model)) {
    const io::HostTensor& tensor = parameters.at(pair.kpipe);
    io::HostTensor hf = pair.layout == Pair::Layout::transposed ? transposed(tensor, pair.rows, pair.cols) : tensor;
    hf.shape = pair.hf_shape();
    out[is_head(pair) ? pair.hf : body_prefix + pair.hf] = std::move(hf);
  }
  return out;
}

std::map<std::string, io::HostTensor> from_gpt2(const config::ModelConfig& model,
                                                const std::map<std::string, io::HostTensor>& tensors,
                                                const std::string& where) {
  // GPT2Model's names, whichever prefix the file uses; the causal-mask
  // buffers older transformers saved are not weights.
  std::map<std::string, const io::HostTensor*> by_name;
  for (const auto& [name, tensor] : tensors) {
    const bool prefixed = name.rfind(body_prefix, 0) == 0;
    const std::string bare = prefixed ? name.substr(std::char_traits<char>::length(body_prefix)) : name;
    const auto ends_with = [&](const std::string& tail) {
      return bare.size() >= tail.size() && bare.compare(bare.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (ends_with(".attn.bias") || ends_with(".attn.masked_bias")) continue;
    by_name[bare] = &tensor;
  }
  std::map<std::string, io::HostTensor> out;
  std::set<std::string> used;
  for (const Pair& pair : pairs(model)) {
    const auto found = by_name.find(pair.hf);
    if (found == by_name.end()) {
      throw input_error(
          fmt::format("{}: no tensor '{}' (or '{}{}'), which config.json's model needs{}", where, pair.hf, body_prefix,
                      pair.hf, is_head(pair) ? "; with tie_word_embeddings = false the file must hold the head" : ""));
    }
    used.insert(pair.hf);
    const io::HostTensor& tensor = *found->second;
    if (tensor.shape != pair.hf_shape()) {
      throw input_error(fmt::format("{}: tensor '{}' is {} but config.json's model needs {}", where, pair.hf,
                                    shape_text(tensor.shape), shape_text(pair.hf_shape())));
    }
    io::HostTensor mine = pair.layout == Pair::Layout::transposed ? transposed(tensor, pair.cols, pair.rows) : tensor;
    mine.shape = {pair.rows, pair.cols};
    out[pair.kpipe] = std::move(mine);
  }
  for (const auto& [name, tensor] : by_name) {
    // A tied model's file may hold the head as a second name of wte.
    if (!used.count(name) && !(model.tie_embeddings && name == "lm_head.weight")) {
      throw input_error(
          fmt::format("{}: tensor '{}' has no place in a GPT-2 model of config.json's shape; kpipe "
                      "import reads GPT2LMHeadModel weights",
                      where, name));
    }
  }
  return out;
}

}  // namespace kpipe::runtime::gpt2
