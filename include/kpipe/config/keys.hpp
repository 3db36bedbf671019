#pragma once
// Key specs as the schema and the model families declare them: a name, its
// default, its range or choices, and a one-line doc (KeySpec).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/config/schema.hpp"

namespace kpipe::config::keys {

inline constexpr double int_max = 2147483647.0;

inline KeySpec integer(std::string name, std::int64_t value, double min, double max, std::string doc) {
  return {std::move(name), ValueType::integer, value, min, max, false, {}, std::move(doc)};
}
// An integer, or one of `words` (a string in the deck).
inline KeySpec integer_or(std::string name, std::int64_t value, double min, double max, std::vector<std::string> words,
                          std::string doc) {
  return {std::move(name), ValueType::integer, value, min, max, false, std::move(words), std::move(doc)};
}
inline KeySpec real(std::string name, double value, double min, std::optional<double> max, bool exclusive,
                    std::string doc) {
  return {std::move(name), ValueType::real, value, min, max, exclusive, {}, std::move(doc)};
}
inline KeySpec choice(std::string name, std::string value, std::vector<std::string> choices, std::string doc) {
  return {std::move(name), ValueType::string, std::move(value), {}, {}, false, std::move(choices), std::move(doc)};
}
inline KeySpec text(std::string name, std::string value, std::string doc) {
  return {std::move(name), ValueType::string, std::move(value), {}, {}, false, {}, std::move(doc)};
}
inline KeySpec boolean(std::string name, bool value, std::string doc) {
  return {std::move(name), ValueType::boolean, value, {}, {}, false, {}, std::move(doc)};
}
inline KeySpec integers(std::string name, const std::vector<int>& value, double min, std::string doc) {
  return {std::move(name), ValueType::integer_list, IntegerList(value.begin(), value.end()), min, int_max, false, {},
          std::move(doc)};
}

}  // namespace kpipe::config::keys
