#pragma once
// kpipe's transformer as Hugging Face's GPT-2 (transformers' GPT2LMHeadModel,
// docs/formats.md "GPT-2 in Hugging Face's format"): which model keys map to
// config.json, and each parameter's name and layout on both sides.
//
// The two compute the same function: pre-LayerNorm blocks with epsilon 1e-5,
// a fused Q|K|V projection whose heads sit side by side in each third,
// attention scaled by 1/sqrt(head width), learned positions, a final
// LayerNorm. GPT-2's Conv1D weights are input x output like kpipe's Linear;
// only the LM head (nn.Linear, output x input) is transposed. GPT-2 has no LM
// head bias (kpipe: model.head_bias = false) and ties that head to the token
// embedding (tie_word_embeddings, kpipe's model.tie_embeddings); untied, the
// head is a tensor of its own.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <cstdint>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/io/safetensors.hpp"

namespace kpipe::runtime::gpt2 {

// The model keys of a GPT-2 config.json (`where` names it in errors); what
// kpipe cannot compute the same (another epsilon, cross-attention, scaling by
// layer index, an unknown activation) is an input error saying why.
config::ModelConfig model_of(const nlohmann::json& config, const std::string& where);

// The config.json of a kpipe model; an input error names the key that GPT-2
// cannot express (model.kind, model.block, model.head_bias).
nlohmann::json config_of(const config::ModelConfig& model);

// Every kpipe parameter of `model` by its global name and shape, as checkpoints hold them.
std::vector<io::ModelShape> parameter_shapes(const config::ModelConfig& model);

// kpipe's parameters (row-major, by global name) as GPT2LMHeadModel's state dict.
std::map<std::string, io::HostTensor> to_gpt2(const config::ModelConfig& model,
                                              const std::map<std::string, io::HostTensor>& parameters);

// GPT2LMHeadModel's (or GPT2Model's: no "transformer." prefix) tensors as
// kpipe's parameters. A missing, unknown or misshapen tensor is an input
// error naming it and `where`.
std::map<std::string, io::HostTensor> from_gpt2(const config::ModelConfig& model,
                                                const std::map<std::string, io::HostTensor>& tensors,
                                                const std::string& where);

// The deck a kpipe checkpoint was written with (its format checked), which
// says what model the file holds.
std::string checkpoint_deck(const std::string& file);

// kpipe export: the weights of transformer checkpoint `file`, whose deck has
// `model` (config_of must accept it), as DIR/config.json and
// DIR/model.safetensors (DIR made where missing).
struct Exported {
  std::int64_t step = 0;    // of the checkpoint
  std::int64_t floats = 0;  // weights written
};
Exported export_checkpoint(const std::string& file, const config::ModelConfig& model, const std::string& directory);

// kpipe import: the model of DIR/config.json and DIR/model.safetensors as kpipe's parameters.
struct Imported {
  config::ModelConfig model;
  std::map<std::string, io::HostTensor> parameters;
};
Imported read_directory(const std::string& directory);

// `imported` as the checkpoint step-0.h5 in `directory` (made where
// missing) of a run `run` whose resolved deck is `deck`, its optimizer state
// zero; returns the file's path.
std::string write_imported(const Imported& imported, const config::RunConfig& run, const std::string& deck,
                           const std::string& directory);

}  // namespace kpipe::runtime::gpt2
