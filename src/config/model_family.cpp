#include "kpipe/config/model_family.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "families/builtin_families.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/registry.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::config {

namespace {

void check_complete(const ModelFamily& family) {
  if (!family.layers || !family.split_widths) {
    throw input_error(fmt::format("model family \"{}\" needs its layers and split_widths", printable(family.name)));
  }
}

Registry<ModelFamily>& registry() {
  static Registry<ModelFamily> families(
      "model family", check_complete,
      {detail::mlp_family(), detail::residual_mlp_family(), detail::transformer_family(), detail::llama_family()});
  return families;
}

bool same_key(const KeySpec& a, const KeySpec& b) {
  return a.type == b.type && a.default_value == b.default_value && a.min == b.min && a.max == b.max &&
         a.min_exclusive == b.min_exclusive && a.choices == b.choices;
}

// A family's keys live under model.*, and one it shares with the schema (a
// built-in key or another family's) must be declared alike.
void check_keys(const ModelFamily& family) {
  for (const KeySpec& key : family.keys) {
    if (key.name.rfind("model.", 0) != 0 || key.name.size() == 6) {
      throw input_error(fmt::format("model family \"{}\" declares the key \"{}\"; a family's keys are model.<name>",
                                    printable(family.name), printable(key.name)));
    }
    if (const KeySpec* known = find_key(key.name); known && !same_key(*known, key)) {
      throw input_error(
          fmt::format("model family \"{}\" declares {} otherwise than the schema has it; share the key as declared or "
                      "give it another name",
                      printable(family.name), key.name));
    }
  }
}

const Value& value_of(const ModelConfig& model, std::string_view key) {
  const auto found = model.values.find(key);
  if (found == model.values.end()) {
    throw input_error(fmt::format("{} is not a key of model.kind = \"{}\"; choose a family that declares it",
                                  printable(key), model.kind));
  }
  return found->second;
}

template <class T>
const T& typed(const ModelConfig& model, std::string_view key) {
  const Value& value = value_of(model, key);
  if (!std::holds_alternative<T>(value)) {
    throw runtime_error(fmt::format("{} is read as another type than its family declares", key));
  }
  return std::get<T>(value);
}

}  // namespace

const ModelFamily& register_model_family(ModelFamily family) {
  check_complete(family);
  check_keys(family);
  return registry().add(std::move(family));
}

const ModelFamily& model_family(std::string_view name, std::string_view key) { return registry().at(name, key); }

std::vector<std::string> model_family_names() { return registry().names(); }

std::vector<KeySpec> model_family_keys() {
  std::vector<KeySpec> keys;
  for (const std::string& name : registry().names()) {
    for (const KeySpec& key : registry().at(name).keys) {
      const bool listed = std::any_of(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.name == key.name; });
      if (!listed) keys.push_back(key);
    }
  }
  return keys;
}

std::string token_family_choices() {
  std::vector<std::string> quoted;
  for (const std::string& name : registry().names()) {
    if (registry().at(name).token_sequences) quoted.push_back(fmt::format("\"{}\"", name));
  }
  return join_choices(quoted, " or ");
}

std::int64_t ModelConfig::integer(std::string_view key) const { return typed<std::int64_t>(*this, key); }
double ModelConfig::real(std::string_view key) const { return typed<double>(*this, key); }
bool ModelConfig::boolean(std::string_view key) const { return typed<bool>(*this, key); }
const std::string& ModelConfig::string(std::string_view key) const { return typed<std::string>(*this, key); }

}  // namespace kpipe::config
