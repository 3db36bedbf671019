#include "kpipe/config/value.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kpipe::config {

std::string describe(ValueType type) {
  switch (type) {
    case ValueType::integer:
      return "an integer";
    case ValueType::real:
      return "a number";
    case ValueType::boolean:
      return "a boolean";
    case ValueType::string:
      return "a string";
    case ValueType::integer_list:
      return "a list of integers";
  }
  return "a value";
}

namespace {
struct TomlWriter {
  std::string operator()(std::int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const {
    std::string text = fmt::format("{}", v);
    // Keep reals recognisable as TOML floats.
    if (text.find_first_of(".eEni") == std::string::npos) text += ".0";
    return text;
  }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(const std::string& v) const { return fmt::format("\"{}\"", v); }
  std::string operator()(const IntegerList& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
};
}  // namespace

std::string to_toml(const Value& value) { return std::visit(TomlWriter{}, value); }

}  // namespace kpipe::config
