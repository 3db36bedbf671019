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
  // A TOML basic string: quotes, backslashes and control characters escaped,
  // so any text reads back as itself.
  std::string operator()(const std::string& v) const {
    std::string out = "\"";
    for (const char c : v) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            out += fmt::format("\\u{:04X}", static_cast<unsigned char>(c));
          } else {
            out += c;
          }
      }
    }
    return out + "\"";
  }
  std::string operator()(const IntegerList& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
};
}  // namespace

std::string to_toml(const Value& value) { return std::visit(TomlWriter{}, value); }

}  // namespace kpipe::config
