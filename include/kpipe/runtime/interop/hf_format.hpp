#pragma once
// kpipe's language models in Hugging Face's layout (docs/formats.md,
// "Hugging Face models"): config.json and safetensors weights that
// transformers' from_pretrained loads. One HfFormat per model family with a
// twin in transformers (GPT-2 for "transformer", Llama for "llama"): which
// model keys map to config.json, and where each kpipe parameter's values are
// on transformers' side. `kpipe export` finds the format by the checkpoint's
// model.kind, `kpipe import` by config.json's model_type.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/io/safetensors.hpp"

namespace kpipe::runtime::hf {

// Rows [first, first + rows) of the Hugging Face tensor `name`.
struct Slice {
  std::string name;
  std::int64_t first = 0;
  std::int64_t rows = 0;
};

// A kpipe parameter (a rows x cols matrix, as checkpoints hold it) and where
// its values are on transformers' side:
//  * matrix: one tensor of the same shape (GPT-2's Conv1D, an embedding);
//  * vector: one tensor of shape [cols] (norms, biases);
//  * transposed: kpipe's column blocks, in order, are the row slices `parts`
//    of nn.Linear weights (output x input), each transposed: Llama's q, k
//    and v projections make one grouped QKV matrix.
struct TensorMap {
  enum class Layout { matrix, vector, transposed };
  std::string kpipe;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  Layout layout = Layout::matrix;
  std::vector<Slice> parts;  // one whole tensor for matrix and vector
};

struct HfFormat {
  std::string family;      // model.kind
  std::string model_type;  // config.json's "model_type"
  std::string name;        // as messages name it: "GPT-2"
  // The prefix of the body's tensors in the *ForCausalLM state dict
  // ("transformer.", "model."), optional on import.
  std::string body_prefix;
  // The model keys of config.json (`where` names it in errors): what kpipe
  // cannot compute the same is an input error naming the key and why.
  std::function<config::ModelConfig(const nlohmann::json& config, const std::string& where)> model_of;
  // The config.json of a kpipe model; an input error names the model key it cannot express.
  std::function<nlohmann::json(const config::ModelConfig& model)> config_of;
  // Every kpipe parameter of the model in checkpoint order, and its values' place.
  std::function<std::vector<TensorMap>(const config::ModelConfig& model)> tensors;
  // Tensors in a file that are no weights (GPT-2's causal-mask buffers).
  std::function<bool(const std::string& name)> ignored;
  // The model.* lines of the deck `kpipe import` writes.
  std::function<std::string(const config::ModelConfig& model)> deck_keys;
};

// The format of a family, for export: an input error where it has none.
const HfFormat& format_of_family(const std::string& kind);
// The format config.json's model_type names, for import: an input error
// naming what kpipe reads.
const HfFormat& format_of_model_type(const nlohmann::json& config, const std::string& where);

// Every kpipe parameter of `model` by its global name and shape.
std::vector<io::ModelShape> parameter_shapes(const HfFormat& format, const config::ModelConfig& model);

// kpipe's parameters (row-major, by global name) as the *ForCausalLM state dict.
std::map<std::string, io::HostTensor> to_hf(const HfFormat& format, const config::ModelConfig& model,
                                            const std::map<std::string, io::HostTensor>& parameters);

// A state dict (its body prefixed or not) as kpipe's parameters. A missing,
// unknown or misshapen tensor is an input error naming it and `where`.
std::map<std::string, io::HostTensor> from_hf(const HfFormat& format, const config::ModelConfig& model,
                                              const std::map<std::string, io::HostTensor>& tensors,
                                              const std::string& where);

// The deck a kpipe checkpoint was written with (its format checked), which
// says what model the file holds.
std::string checkpoint_deck(const std::string& file);

// kpipe export: the weights of checkpoint `file`, whose deck has `model`, as
// DIR/config.json and DIR/model.safetensors (DIR made where missing).
struct Exported {
  std::int64_t step = 0;    // of the checkpoint
  std::int64_t floats = 0;  // weights written
};
Exported export_checkpoint(const std::string& file, const config::ModelConfig& model, const std::string& directory);

// kpipe import: DIR/config.json and its weights, DIR/model.safetensors or
// the files DIR/model.safetensors.index.json names (each inside DIR), as
// kpipe's model and parameters.
struct Imported {
  const HfFormat* format = nullptr;
  config::ModelConfig model;
  std::map<std::string, io::HostTensor> parameters;
};
Imported read_directory(const std::string& directory);

// `imported` as the checkpoint step-0.h5 in `directory` (made where
// missing) of a run `run` whose resolved deck is `deck`, its optimizer state
// zero; returns the file's path.
std::string write_imported(const Imported& imported, const config::RunConfig& run, const std::string& deck,
                           const std::string& directory);

// The formats, each in its own file.
HfFormat gpt2_format();
HfFormat llama_format();

}  // namespace kpipe::runtime::hf
