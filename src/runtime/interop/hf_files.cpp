// The files of kpipe export and import: a checkpoint read into a Hugging
// Face state dict and written as safetensors, and back: one file, or the
// shards a model.safetensors.index.json names (hf_format.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <limits>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "kpipe/runtime/interop/hf_format.hpp"
#include "kpipe/runtime/persistence/checkpoint_ranks.hpp"

namespace kpipe::runtime::hf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* config_name = "config.json";
constexpr const char* weights_name = "model.safetensors";
constexpr const char* index_name = "model.safetensors.index.json";

std::string in(const std::string& directory, const char* name) { return (fs::path(directory) / name).string(); }

// A config.json is kilobytes; a megabyte bounds a hostile one. An index
// names each tensor once: 64 MB is millions of them.
constexpr InputFile config_file{"Hugging Face config.json", std::size_t{1} << 20,
                                "; kpipe import reads a directory written by save_pretrained"};
constexpr InputFile index_file{"Hugging Face model.safetensors.index.json", std::size_t{64} << 20,
                               "; kpipe import reads a directory written by save_pretrained"};

json read_json(const std::string& path, const InputFile& kind) {
  const std::string text = read_input_file(path, kind);
  if (json_depth(text) > limits::json_depth) {
    throw input_error(fmt::format("{}: nests JSON more than {} deep; {} is flat", path, limits::json_depth, kind.what));
  }
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    throw input_error(fmt::format("{}: not valid JSON; rewrite it with save_pretrained", path));
  }
  return config;
}

// A directory's weights, and the file that named them (for messages).
struct Weights {
  std::map<std::string, io::HostTensor> tensors;
  std::string source;
};

// The weights of `directory`: model.safetensors, or else the shards its
// index's weight_map names, each a file inside the directory holding the
// tensors the map gives it.
Weights read_weights(const std::string& directory) {
  const std::string single = in(directory, weights_name), index_path = in(directory, index_name);
  if (fs::exists(single) || !fs::exists(index_path)) return {io::read_safetensors(single).tensors, single};
  const json index = read_json(index_path, index_file);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw input_error(fmt::format("{}: has no \"weight_map\" object naming each tensor's file", index_path));
  }
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || fs::path(name).filename() != fs::path(name) || name == "." || name == "..") {
      throw input_error(fmt::format("{}: tensor '{}' is in {}, not a file of the model's directory", index_path,
                                    printable(tensor), file.dump()));
    }
    by_file[name].push_back(tensor);
  }
  std::map<std::string, io::HostTensor> tensors;
  for (const auto& [file, names] : by_file) {
    const std::string path = in(directory, file.c_str());
    if (!fs::exists(path)) {
      throw input_error(fmt::format("{}: names {} for tensor '{}', but the directory has no such file", index_path,
                                    printable(file), printable(names.front())));
    }
    io::SafetensorsFile shard = io::read_safetensors(path);
    for (const std::string& name : names) {
      const auto found = shard.tensors.find(name);
      if (found == shard.tensors.end()) {
        throw input_error(
            fmt::format("{}: names tensor '{}' in {}, which does not hold it", index_path, printable(name), path));
      }
      tensors[name] = std::move(found->second);
    }
  }
  return {std::move(tensors), index_path};
}

}  // namespace

std::string checkpoint_deck(const std::string& file) { return io::checkpoint_deck(file); }

Exported export_checkpoint(const std::string& file, const config::ModelConfig& model, const std::string& directory) {
  const HfFormat& format = format_of_family(model.kind);
  const json hf_config = format.config_of(model);
  const auto shapes = parameter_shapes(format, model);
  // The outputs checked before the checkpoint is read: a refusal costs nothing.
  const std::string what = format.name + " files";
  create_writable_directory(directory, "kpipe export's DIR", what.c_str());
  require_writable(in(directory, weights_name), "safetensors");
  require_writable(in(directory, config_name), "config.json");
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
  io::write_safetensors(in(directory, weights_name), to_hf(format, model, host), {{"format", "pt"}});
  write_output(in(directory, config_name), "config.json", [&](std::ostream& out) { out << hf_config.dump(2) << '\n'; });
  return exported;
}

Imported read_directory(const std::string& directory) {
  const std::string config_path = in(directory, config_name);
  const json config = read_json(config_path, config_file);
  Imported imported;
  imported.format = &format_of_model_type(config, config_path);
  imported.model = imported.format->model_of(config, config_path);
  const Weights weights = read_weights(directory);
  imported.parameters = from_hf(*imported.format, imported.model, weights.tensors, weights.source);
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
  return io::write_checkpoint<float>(CheckpointRanks(comm::self(), "a Hugging Face import"), directory, info, values,
                                     state, std::numeric_limits<int>::max(),
                                     /*fault_rank=*/-1);
}

}  // namespace kpipe::runtime::hf
