// `kpipe export CHECKPOINT DIR` and `kpipe import DIR CHECKPOINT_DIR`: a
// transformer checkpoint as Hugging Face GPT-2 (config.json and
// model.safetensors, which transformers' GPT2LMHeadModel.from_pretrained
// loads), and back into a kpipe checkpoint any layout restarts from.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "commands.hpp"
#include "gpt2_format.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/io/safetensors.hpp"

namespace kpipe::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* config_name = "config.json";
constexpr const char* weights_name = "model.safetensors";
constexpr const char* deck_name = "model.toml";

void require_one_process(const char* command) {
  if (comm::size_of(comm::world()) != 1) {
    throw input_error(fmt::format("kpipe {} converts files on one process; run it without mpirun or srun", command));
  }
}

void make_directory(const std::string& path, const char* what) {
  std::error_code error;
  fs::create_directories(path, error);
  if (error || !fs::is_directory(path)) {
    throw input_error(fmt::format("{} '{}' cannot be created ({}); name a writable directory", what, path,
                                  error ? error.message() : "a file of that name exists"));
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw input_error(fmt::format("cannot write '{}'; check that its directory is writable", path));
}

double mib(std::int64_t floats) { return static_cast<double>(floats) * sizeof(float) / (1 << 20); }

// A config.json is kilobytes; a megabyte bounds a hostile one.
constexpr InputFile config_file{"GPT-2 config.json", std::size_t{1} << 20,
                                "; kpipe import reads a directory written by save_pretrained"};

json read_config(const std::string& path) {
  const std::string text = read_input_file(path, config_file);
  if (json_depth(text) > limits::json_depth) {
    throw input_error(
        fmt::format("{}: nests JSON more than {} deep; a GPT-2 config.json is flat", path, limits::json_depth));
  }
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded())
    throw input_error(fmt::format("{}: not valid JSON; rewrite it with save_pretrained", path));
  return config;
}

// The deck of an imported model: its model keys, the checkpoint to start from.
std::string imported_deck(const config::ModelConfig& m, const std::string& source, const std::string& checkpoint) {
  return fmt::format(
      "# GPT-2 weights imported by `kpipe import {}`; add the data and training keys\n"
      "# (or pass them as key=value) and run `kpipe infer` or `kpipe run` with it.\n"
      "model.kind = \"transformer\"\n"
      "model.vocab = {}\nmodel.context = {}\nmodel.dim = {}\nmodel.heads = {}\nmodel.layers = {}\n"
      "model.mlp_ratio = {}\nmodel.activation = \"{}\"\nmodel.head_bias = false\n"
      "checkpoint.restart = \"{}\"\n",
      source, m.vocab, m.context, m.dim, m.heads, m.layers, m.mlp_ratio, config::name_of(m.activation), checkpoint);
}

// Zero optimizer state for `parameters`, named as the deck's optimizer keeps
// it: a run restarting from step 0 starts its optimizer fresh.
std::vector<io::NamedMatrix<float>> fresh_optimizer_state(const config::OptimizerConfig& optimizer,
                                                          const std::vector<io::NamedMatrix<float>>& parameters) {
  const std::vector<const char*> kinds = optimizer.kind == config::OptimizerKind::sgd
                                             ? std::vector<const char*>{"momentum_buffer"}
                                             : std::vector<const char*>{"exp_avg", "exp_avg_sq"};
  std::vector<io::NamedMatrix<float>> state;
  for (const auto& parameter : parameters) {
    for (const char* kind : kinds) {
      state.push_back({parameter.name + "." + kind,
                       tensor::zero_matrix<float>("kpipe::import::" + parameter.name, parameter.value.extent_int(0),
                                                  parameter.value.extent_int(1))});
    }
  }
  return state;
}

}  // namespace

int export_command(const runtime::Environment&, const ExportOptions& options) {
  require_one_process("export");
  const std::string& file = options.checkpoint;
  const config::RunConfig run =
      config::run_config(config::parse_deck(io::checkpoint_deck(file), fmt::format("the deck attribute of {}", file)));
  const json hf_config = gpt2::config_of(run.model);
  const auto shapes = gpt2::parameter_shapes(run.model);
  std::vector<io::NamedMatrix<float>> parameters;
  for (const auto& shape : shapes) {
    parameters.push_back(
        {shape.name, tensor::uninitialized_matrix<float>("kpipe::export::" + shape.name, static_cast<int>(shape.rows),
                                                         static_cast<int>(shape.cols))});
  }
  const io::CheckpointInfo info = io::read_checkpoint<float>(file, shapes, parameters, {});
  std::map<std::string, io::HostTensor> host;
  std::int64_t floats = 0;
  for (const auto& parameter : parameters) {
    io::HostTensor& tensor = host[parameter.name];
    tensor.shape = {parameter.value.extent(0), parameter.value.extent(1)};
    tensor.values = tensor::to_host<float>(parameter.value);
    floats += tensor.elements();
  }
  make_directory(options.directory, "kpipe export's directory");
  const std::string weights = (fs::path(options.directory) / weights_name).string();
  io::write_safetensors(weights, gpt2::to_gpt2(run.model, host), {{"format", "pt"}});
  write_text((fs::path(options.directory) / config_name).string(), hf_config.dump(2) + "\n");
  log::info(
      "export: step {} of {} as GPT-2 ({} layers, width {}, {} heads, vocabulary {}, context {}, {}): {} "
      "({:.3g} MiB) and {} in {}",
      info.step, file, run.model.layers, run.model.dim, run.model.heads, run.model.vocab, run.model.context,
      hf_config["activation_function"].get<std::string>(), weights_name, mib(floats), config_name, options.directory);
  return 0;
}

int import_command(const runtime::Environment&, const ImportOptions& options) {
  require_one_process("import");
  const std::string config_path = (fs::path(options.directory) / config_name).string();
  const std::string weights = (fs::path(options.directory) / weights_name).string();
  const json hf_config = read_config(config_path);
  const config::ModelConfig model = gpt2::model_of(hf_config, config_path);
  const bool tied = gpt2::tied(hf_config);
  const io::SafetensorsFile file = io::read_safetensors(weights);
  const auto tensors = gpt2::from_gpt2(model, tied, file.tensors, weights);

  make_directory(options.checkpoint_directory, "kpipe import's checkpoint directory");
  const std::string checkpoint = io::checkpoint_file(options.checkpoint_directory, 0);
  const std::string deck_text = imported_deck(model, options.directory, checkpoint);
  const config::Deck deck = config::parse_deck(deck_text, deck_name);
  const config::RunConfig run = config::run_config(deck);
  std::vector<io::NamedMatrix<float>> parameters;
  std::int64_t floats = 0;
  for (const auto& [name, tensor] : tensors) {
    auto value = tensor::uninitialized_matrix<float>("kpipe::import::" + name, static_cast<int>(tensor.shape[0]),
                                                     static_cast<int>(tensor.shape[1]));
    tensor::from_host<float>(tensor.values, value);
    parameters.push_back({name, value});
    floats += tensor.elements();
  }
  io::CheckpointInfo info;
  info.deck = deck.resolved_toml();
  info.schedule = run.pipeline.schedule;
  io::write_checkpoint<float>(comm::self(), options.checkpoint_directory, info, parameters,
                              fresh_optimizer_state(run.optimizer, parameters), std::numeric_limits<int>::max(),
                              /*fault_rank=*/-1);
  const std::string deck_path = (fs::path(options.checkpoint_directory) / deck_name).string();
  write_text(deck_path, deck_text);
  log::info(
      "import: GPT-2 of {} ({} layers, width {}, {} heads, vocabulary {}, context {}, {}{}) as {} ({:.3g} MiB "
      "of weights); its model keys are in {}",
      options.directory, model.layers, model.dim, model.heads, model.vocab, model.context,
      config::name_of(model.activation), tied ? ", the tied head copied from the embedding" : "", checkpoint,
      mib(floats), deck_path);
  return 0;
}

}  // namespace kpipe::app
