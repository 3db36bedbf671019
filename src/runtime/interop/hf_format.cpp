// The mapping every Hugging Face format shares (hf_format.hpp): a kpipe
// parameter's values to and from the state dict's tensors, and the lookup
// of a format by family or by model_type.
#include "kpipe/runtime/interop/hf_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::runtime::hf {

using nlohmann::json;

namespace {

const std::vector<HfFormat>& formats() {
  static const std::vector<HfFormat> all = {gpt2_format(), llama_format()};
  return all;
}

// The LM head of a *ForCausalLM model sits outside its body, unprefixed.
constexpr const char* head_name = "lm_head.weight";

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Every Hugging Face tensor the maps place values in, with its shape.
std::map<std::string, std::vector<std::int64_t>> hf_shapes(const std::vector<TensorMap>& maps) {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const TensorMap& map : maps) {
    for (const Slice& slice : map.parts) {
      switch (map.layout) {
        case TensorMap::Layout::matrix:
          shapes[slice.name] = {map.rows, map.cols};
          break;
        case TensorMap::Layout::vector:
          shapes[slice.name] = {map.cols};
          break;
        case TensorMap::Layout::transposed: {
          auto& shape = shapes[slice.name];
          if (shape.empty()) shape = {0, map.rows};
          shape[0] = std::max(shape[0], slice.first + slice.rows);
          break;
        }
      }
    }
  }
  return shapes;
}

// Calls copy(kpipe element, hf element) for every value of `map`, the hf
// element an index into its tensor (`slice`).
template <class Copy>
void for_each_value(const TensorMap& map, Copy copy) {
  if (map.layout != TensorMap::Layout::transposed) {
    for (std::int64_t e = 0; e < map.rows * map.cols; ++e) copy(map.parts.front(), e, e);
    return;
  }
  std::int64_t column = 0;
  for (const Slice& slice : map.parts) {
    for (std::int64_t r = 0; r < slice.rows; ++r) {
      for (std::int64_t i = 0; i < map.rows; ++i) {
        copy(slice, i * map.cols + column + r, (slice.first + r) * map.rows + i);
      }
    }
    column += slice.rows;
  }
}

}  // namespace

const HfFormat& format_of_family(const std::string& kind) {
  for (const HfFormat& format : formats()) {
    if (format.family == kind) return format;
  }
  std::vector<std::string> families;
  for (const HfFormat& format : formats()) families.push_back(fmt::format("\"{}\" ({})", format.family, format.name));
  throw input_error(fmt::format(
      "kpipe export writes Hugging Face models of model.kind {}, but the checkpoint's deck has model.kind = \"{}\"",
      join_choices(families, " and "), printable(kind)));
}

const HfFormat& format_of_model_type(const json& config, const std::string& where) {
  if (!config.is_object()) {
    throw input_error(
        fmt::format("{}: is a JSON {}, not the object of keys save_pretrained writes", where, config.type_name()));
  }
  const bool named = config.contains("model_type") && config["model_type"].is_string();
  for (const HfFormat& format : formats()) {
    if (named && config["model_type"] == format.model_type) return format;
  }
  std::vector<std::string> types;
  for (const HfFormat& format : formats()) types.push_back(fmt::format("{} (\"{}\")", format.name, format.model_type));
  throw input_error(fmt::format("{}: model_type is {}; kpipe import reads {} models", where,
                                config.contains("model_type") ? config["model_type"].dump() : "missing",
                                join_choices(types, " and ")));
}

std::vector<io::ModelShape> parameter_shapes(const HfFormat& format, const config::ModelConfig& model) {
  std::vector<io::ModelShape> shapes;
  for (const TensorMap& map : format.tensors(model)) shapes.push_back({map.kpipe, map.rows, map.cols});
  return shapes;
}

std::map<std::string, io::HostTensor> to_hf(const HfFormat& format, const config::ModelConfig& model,
                                            const std::map<std::string, io::HostTensor>& parameters) {
  const std::vector<TensorMap> maps = format.tensors(model);
  std::map<std::string, io::HostTensor> out;
  for (const auto& [name, shape] : hf_shapes(maps)) {
    std::int64_t elements = 1;
    for (const std::int64_t extent : shape) elements *= extent;
    out[name == head_name ? name : format.body_prefix + name] = {
        shape, std::vector<float>(static_cast<std::size_t>(elements))};
  }
  for (const TensorMap& map : maps) {
    const std::vector<float>& mine = parameters.at(map.kpipe).values;
    for_each_value(map, [&](const Slice& slice, std::int64_t kpipe, std::int64_t hf) {
      out[slice.name == head_name ? slice.name : format.body_prefix + slice.name].values[hf] = mine[kpipe];
    });
  }
  return out;
}

std::map<std::string, io::HostTensor> from_hf(const HfFormat& format, const config::ModelConfig& model,
                                              const std::map<std::string, io::HostTensor>& tensors,
                                              const std::string& where) {
  // The body's names, whichever prefix the file uses.
  std::map<std::string, const io::HostTensor*> by_name;
  for (const auto& [name, tensor] : tensors) {
    const bool prefixed = name.rfind(format.body_prefix, 0) == 0;
    const std::string bare = prefixed ? name.substr(format.body_prefix.size()) : name;
    if (format.ignored && format.ignored(bare)) continue;
    if (!by_name.emplace(bare, &tensor).second) {
      throw input_error(fmt::format("{}: holds tensor '{}' twice, with and without the '{}' prefix; keep one", where,
                                    printable(bare), format.body_prefix));
    }
  }
  const std::vector<TensorMap> maps = format.tensors(model);
  const auto shapes = hf_shapes(maps);
  for (const auto& [name, shape] : shapes) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) {
      throw input_error(fmt::format(
          "{}: no tensor '{}' (or '{}{}'), which config.json's model needs{}", where, name, format.body_prefix, name,
          name == head_name ? "; with tie_word_embeddings = false the file must hold the head" : ""));
    }
    if (found->second->shape != shape) {
      throw input_error(fmt::format("{}: tensor '{}' is {} but config.json's model needs {}", where, name,
                                    shape_text(found->second->shape), shape_text(shape)));
    }
  }
  for (const auto& [name, tensor] : by_name) {
    // A tied model's file may hold the head as a second name of the token table.
    if (!shapes.count(name) && !(model.tie_embeddings && name == head_name)) {
      throw input_error(fmt::format(
          "{}: tensor '{}' has no place in a {} model of config.json's shape; kpipe import reads {} weights", where,
          name, format.name, format.name));
    }
  }
  std::map<std::string, io::HostTensor> out;
  for (const TensorMap& map : maps) {
    io::HostTensor& mine = out[map.kpipe];
    mine.shape = {map.rows, map.cols};
    mine.values.resize(static_cast<std::size_t>(map.rows * map.cols));
    for_each_value(map, [&](const Slice& slice, std::int64_t kpipe, std::int64_t hf) {
      mine.values[kpipe] = by_name.at(slice.name)->values[hf];
    });
  }
  return out;
}

}  // namespace kpipe::runtime::hf
