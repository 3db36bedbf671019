#pragma once
// The typed values a deck key can hold.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kpipe::config {

enum class ValueType { integer, real, boolean, string, integer_list };

using IntegerList = std::vector<std::int64_t>;
using Value = std::variant<std::int64_t, double, bool, std::string, IntegerList>;

// "an integer", "a string", ... for messages.
std::string describe(ValueType type);
// The value as it would be written in a deck (strings quoted, lists bracketed).
std::string to_toml(const Value& value);

}  // namespace kpipe::config
