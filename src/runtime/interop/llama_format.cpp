// kpipe's llama as Hugging Face's Llama (transformers' LlamaForCausalLM).
// The two compute the same function: RMSNorm, rotary embeddings in the
// rotate-half convention (inv_freq = rope_theta^(-2i/head_dim)), attention
// scaled by 1/sqrt(head_dim) whose key/value heads each serve
// num_attention_heads / num_key_value_heads consecutive query heads
// (repeat_kv), SwiGLU silu(gate) ⊙ up, no biases. The projections are
// nn.Linear (output x input), so every kpipe weight is transposed; kpipe's
// grouped QKV matrix interleaves q_proj, k_proj and v_proj by group
// ([the group's query heads | its key head | its value head], Megatron-LM's
// layout), and its gate|up matrix is gate_proj then up_proj.
#include <fmt/format.h>

#include "hf_config.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"
#include "kpipe/runtime/interop/hf_format.hpp"

namespace kpipe::runtime::hf {

using nlohmann::json;

namespace {

std::int64_t kv_heads(const config::ModelConfig& m) { return m.integer("model.kv_heads"); }
std::int64_t ffn_dim(const config::ModelConfig& m) { return m.integer("model.ffn_dim"); }

std::vector<TensorMap> tensors(const config::ModelConfig& m) {
  using L = TensorMap::Layout;
  const std::int64_t d = m.dim, head_dim = m.dim / m.heads, groups = kv_heads(m), per_group = m.heads / groups;
  const std::int64_t ffn = ffn_dim(m);
  std::vector<TensorMap> out = {{model::token_table_parameter, m.vocab, d, L::matrix, {{"embed_tokens.weight"}}}};
  const auto norm = [&](const std::string& kpipe, const std::string& hf) {
    out.push_back({kpipe + ".gamma", 1, d, L::vector, {{hf + ".weight"}}});
  };
  for (int i = 0; i < m.blocks; ++i) {
    const std::string k = "layer" + std::to_string(i + 1) + ".", h = "layers." + std::to_string(i) + ".";
    norm(k + "attn_norm", h + "input_layernorm");
    std::vector<Slice> qkv;
    for (std::int64_t g = 0; g < groups; ++g) {
      for (std::int64_t j = 0; j < per_group; ++j) {
        qkv.push_back({h + "self_attn.q_proj.weight", (g * per_group + j) * head_dim, head_dim});
      }
      qkv.push_back({h + "self_attn.k_proj.weight", g * head_dim, head_dim});
      qkv.push_back({h + "self_attn.v_proj.weight", g * head_dim, head_dim});
    }
    out.push_back({k + "attn.qkv.weight", d, groups * (per_group + 2) * head_dim, L::transposed, qkv});
    out.push_back({k + "attn.proj.weight", d, d, L::transposed, {{h + "self_attn.o_proj.weight", 0, d}}});
    norm(k + "mlp_norm", h + "post_attention_layernorm");
    out.push_back({k + "mlp.gate_up.weight",
                   d,
                   2 * ffn,
                   L::transposed,
                   {{h + "mlp.gate_proj.weight", 0, ffn}, {h + "mlp.up_proj.weight", 0, ffn}}});
    out.push_back({k + "mlp.down.weight", ffn, d, L::transposed, {{h + "mlp.down_proj.weight", 0, d}}});
  }
  const std::string head = "layer" + std::to_string(m.blocks + 1) + ".";
  norm(head + "norm", "norm");
  // Tied, the head is the token table (embed_tokens) itself.
  if (!m.tie_embeddings) {
    out.push_back({head + "lm_head.weight", d, m.vocab, L::transposed, {{"lm_head.weight", 0, m.vocab}}});
  }
  return out;
}

config::ModelConfig model_of(const json& config, const std::string& where) {
  const ConfigReader read(config, where, "a Llama config.json");
  config::ModelConfig m;
  m.kind = "llama";
  m.vocab = read.positive("vocab_size", 1 << 24);
  m.context = read.positive("max_position_embeddings", 1 << 16);
  m.dim = read.positive("hidden_size", 1 << 16);
  m.blocks = read.positive("num_hidden_layers", 4096);
  m.heads = read.positive("num_attention_heads", 1024);
  const int kv = read.has("num_key_value_heads") ? read.positive("num_key_value_heads", 1024) : m.heads;
  const int ffn = read.positive("intermediate_size", 1 << 20);
  m.head_bias = false;
  m.tie_embeddings = read.tied(false);  // LlamaConfig's default
  if (m.dim % m.heads != 0) {
    read.refuse(fmt::format("hidden_size = {} is not a multiple of num_attention_heads = {}", m.dim, m.heads));
  }
  if (m.heads % kv != 0) {
    read.refuse(fmt::format("num_key_value_heads = {} does not divide num_attention_heads = {}", kv, m.heads));
  }
  if (read.has("head_dim") && read.at("head_dim") != m.dim / m.heads) {
    read.refuse(fmt::format("\"head_dim\" is {}; kpipe's heads are hidden_size / num_attention_heads = {} wide",
                            read.at("head_dim").dump(), m.dim / m.heads));
  }
  if ((m.dim / m.heads) % 2 != 0) {
    read.refuse(fmt::format("heads of {} features: rotary embeddings turn pairs of features", m.dim / m.heads));
  }
  read.require("hidden_act", "silu", "kpipe's llama MLP is SwiGLU with silu");
  read.require("rope_scaling", nullptr, "kpipe's rotary embeddings are unscaled");
  read.require("attention_bias", false, "kpipe's llama projections have no bias");
  read.require("mlp_bias", false, "kpipe's llama projections have no bias");
  read.require("sliding_window", nullptr, "kpipe's attention sees the whole causal context");
  const double rope_theta = read.positive_real("rope_theta", 10000.0);
  const double eps = read.positive_real("rms_norm_eps", 1e-6);  // LlamaConfig's default
  m.values = {{"model.kv_heads", std::int64_t{kv}},
              {"model.ffn_dim", std::int64_t{ffn}},
              {"model.rope_theta", rope_theta},
              {"model.norm_eps", eps}};
  return m;
}

json config_of(const config::ModelConfig& m) {
  if (!m.block.empty() && m.block != "llama_block") {
    throw input_error(
        fmt::format("kpipe export writes Llama models: the checkpoint's blocks are model.block = \"{}\", not "
                    "llama_block",
                    m.block));
  }
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", m.vocab},
          {"max_position_embeddings", m.context},
          {"hidden_size", m.dim},
          {"intermediate_size", ffn_dim(m)},
          {"num_hidden_layers", m.blocks},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", kv_heads(m)},
          {"hidden_act", "silu"},
          {"rms_norm_eps", m.real("model.norm_eps")},
          {"rope_theta", m.real("model.rope_theta")},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"pretraining_tp", 1},
          {"tie_word_embeddings", m.tie_embeddings},
          {"torch_dtype", "float32"}};
}

std::string deck_keys(const config::ModelConfig& m) {
  return fmt::format(
      "model.kind = \"llama\"\n"
      "model.vocab = {}\nmodel.context = {}\nmodel.dim = {}\nmodel.heads = {}\nmodel.kv_heads = {}\n"
      "model.layers = {}\nmodel.ffn_dim = {}\nmodel.rope_theta = {}\nmodel.norm_eps = {}\nmodel.tie_embeddings = {}\n",
      m.vocab, m.context, m.dim, m.heads, kv_heads(m), m.blocks, ffn_dim(m), m.real("model.rope_theta"),
      m.real("model.norm_eps"), m.tie_embeddings);
}

}  // namespace

HfFormat llama_format() { return {"llama", "llama", "Llama", "model.", model_of, config_of, tensors, {}, deck_keys}; }

}  // namespace kpipe::runtime::hf
