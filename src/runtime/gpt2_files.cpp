// The files of kpipe export and import: a checkpoint read into GPT-2's
// tensors and written as safetensors, and back (gpt2_format.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <limits>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/optimizer.hpp"
#include "kpipe/runtime/checkpoint_ranks.hpp"
#include "kpipe/runtime/gpt2_format.hpp"

namespace kpipe::runtime::gpt2 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* config_name = "config.json";
constexpr const char* weights_name = "model.safetensors";

std::string in(const std::string& directory, const char* name) { return (fs::path(directory) / name).string(); }

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
  if (config.is_discarded()) {
    throw input_error(fmt::format("{}: not valid JSON; rewrite it with save_pretrained", path));
  }
  return config;
}

}  // namespace

std::string checkpoint_deck(const std::string& file) { return io::checkpoint_deck(file); }

Exported export_checkpoint(const std::string& file, const config::ModelConfig& model, const std::string& directory) {
  const json hf_config = config_of(model);
  const auto shapes = parameter_shapes(model);
  std::vector<io::NamedMatrix<float>> parameters;
  for (const auto& shape : shapes) {
    parameters.push_back(
        {shape.name, tensor::uninitialized_matrix<float>("kpipe::export::" + shape.name, static_cast<int>(shape.rows),
                                                         static_cast<int>(shape.cols))});
  }
  Exported exported;
  exported.step = io::read_checkpoint<float>(file, shapes, parameters, {}).step;
  std::map<std::string, io::HostTensor> host;
  for (const auto& parameter : parameters) {
    io::HostTensor& tensor = host[parameter.name];
    tensor.shape = {static_cast<std::int64_t>(parameter.value.extent(0)),
                    static_cast<std::int64_t>(parameter.value.extent(1))};
    tensor.values = tensor::to_host<float>(parameter.value);
    exported.floats += tensor.elements();
  }
  create_writable_directory(directory, "kpipe export's DIR", "GPT-2 files");
  io::write_safetensors(in(directory, weights_name), to_gpt2(model, host), {{"format", "pt"}});
  write_output(in(directory, config_name), "config.json", [&](std::ostream& out) { out << hf_config.dump(2) << '\n'; });
  return exported;
}

Imported read_directory(const std::string& directory) {
  const std::string config_path = in(directory, config_name), weights = in(directory, weights_name);
  Imported imported;
  imported.model = model_of(read_config(config_path), config_path);
  imported.parameters = from_gpt2(imported.model, io::read_safetensors(weights).tensors, weights);
  return imported;
}

std::string write_imported(const Imported& imported, const config::RunConfig& run, const std::string& deck,
                           const std::string& directory) {
  std::vector<model::Parameter<float>> parameters;
  std::vector<io::NamedMatrix<float>> values;
  for (const auto& [name, tensor] : imported.parameters) {
    auto value = tensor::uninitialized_matrix<float>("kpipe::import::" + name, static_cast<int>(tensor.shape[0]),
                                                     static_cast<int>(tensor.shape[1]));
    tensor::from_host<float>(tensor.values, value);
    parameters.push_back({name, value, {}});
    values.push_back({name, value});
  }
  // The deck's optimizer, fresh: a run restarting from step 0 starts it anew.
  tensor::ExecContext exec;
  const model::Optimizer<float> optimizer(run.optimizer, parameters, exec);
  std::vector<io::NamedMatrix<float>> state;
  for (const auto& s : optimizer.state()) state.push_back({s.name, s.value});
  create_writable_directory(directory, "kpipe import's CHECKPOINT_DIR");
  io::CheckpointInfo info;
  info.deck = deck;
  info.schedule = run.pipeline.schedule;
  return io::write_checkpoint<float>(CheckpointRanks(comm::self(), "a GPT-2 import"), directory, info, values, state,
                                     std::numeric_limits<int>::max(),
                                     /*fault_rank=*/-1);
}

}  // namespace kpipe::runtime::gpt2
