#pragma once
// The one registry of every deck key (DESIGN.md §6): type, default, allowed
// range or choices, and a one-line doc. Parsing, defaults, validation,
// `kpipe deck --doc` and docs/deck.md all read it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/config/value.hpp"

namespace kpipe::config {

struct KeySpec {
  std::string name;  // dotted, e.g. "pipeline.stages"
  ValueType type;
  Value default_value;
  std::optional<double> min;  // numbers and list elements
  std::optional<double> max;
  bool min_exclusive = false;        // the value must be > min, not >= min
  std::vector<std::string> choices;  // strings: the allowed values
  std::string doc;
};

const std::vector<KeySpec>& schema();
// nullptr when the key is unknown.
const KeySpec* find_key(std::string_view name);
std::vector<std::string> key_names();

// "must be >= 1", "must be one of gpipe, 1f1b", ... for messages and docs.
std::string allowed_values(const KeySpec& spec);

// The reference of every key as Markdown: docs/deck.md and `kpipe deck --doc`.
std::string schema_markdown();

}  // namespace kpipe::config
