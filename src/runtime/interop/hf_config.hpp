#pragma once
// Reading a Hugging Face config.json into model keys (hf_format.hpp): every
// refusal one input error naming the file, the key and why.

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kpipe/core/error.hpp"

namespace kpipe::runtime::hf {

class ConfigReader {
 public:
  // `what` names the file in messages ("a GPT-2 config.json").
  ConfigReader(const nlohmann::json& config, std::string where, std::string what)
      : config_(config), where_(std::move(where)), what_(std::move(what)) {
    if (!config_.is_object()) refuse("is not a JSON object");
  }

  [[noreturn]] void refuse(const std::string& why) const { throw input_error(fmt::format("{}: {}", where_, why)); }

  int positive(const char* key, int most) const {
    if (!config_.contains(key)) refuse(fmt::format("has no \"{}\"; {} names it", key, what_));
    const nlohmann::json& value = config_[key];
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > most) {
      refuse(fmt::format("\"{}\" is {}, not an integer from 1 to {}", key, value.dump(), most));
    }
    return value.get<int>();
  }

  // A number > 0 (the default where absent).
  double positive_real(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::json& value = config_[key];
    if (!value.is_number() || !(value.get<double>() > 0)) {
      refuse(fmt::format("\"{}\" is {}, not a number > 0", key, value.dump()));
    }
    return value.get<double>();
  }

  // A key that must hold `expected` (or be absent or null, when that is the default).
  void require(const char* key, const nlohmann::json& expected, const char* why) const {
    if (has(key) && config_[key] != expected) {
      refuse(fmt::format("\"{}\" is {}; kpipe needs {} ({})", key, config_[key].dump(), expected.dump(), why));
    }
  }

  // Whether the LM head is tied to the token embedding: tie_word_embeddings
  // as transformers reads it (Python's truth: null, false, 0 and "" untie),
  // `fallback` where absent.
  bool tied(bool fallback) const {
    if (!config_.contains("tie_word_embeddings")) return fallback;
    const nlohmann::json& value = config_["tie_word_embeddings"];
    if (value.is_boolean()) return value.get<bool>();
    if (value.is_number()) return value.get<double>() != 0;
    if (value.is_string()) return !value.get<std::string>().empty();
    return !value.is_null() && !value.empty();
  }

  const nlohmann::json& at(const char* key) const { return config_[key]; }
  bool has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }

 private:
  const nlohmann::json& config_;
  std::string where_;
  std::string what_;
};

}  // namespace kpipe::runtime::hf
