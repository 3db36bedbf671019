#include "kpipe/config/deck.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <toml.hpp>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "toml_scan.hpp"

namespace kpipe::config {

namespace {

// A TOML leaf with its dotted key and the place it came from; `written` is
// the value's text as the user wrote it, for messages.
struct RawEntry {
  std::string key;
  toml::value value;
  std::string origin;
  std::uint_least32_t line = 0;
  std::string written;
};

// Line numbers from byte offsets in O(log n). toml11's own location().line()
// counts the newlines from the start of the text on every call, which made
// a deck of many keys take time quadratic in its length.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') newlines_.push_back(i);
    }
  }
  std::uint_least32_t line(const toml::value& v) const {
    const auto* region = dynamic_cast<const toml::detail::region*>(toml::detail::get_region(v));
    if (region == nullptr) return static_cast<std::uint_least32_t>(v.location().line());
    const auto offset = static_cast<std::size_t>(region->first() - region->begin());
    return static_cast<std::uint_least32_t>(
        1 + (std::lower_bound(newlines_.begin(), newlines_.end(), offset) - newlines_.begin()));
  }

 private:
  std::vector<std::size_t> newlines_;
};

// The value's own text ("1e400"), which the parsed double may not show.
std::string written_text(const toml::value& v) {
  const auto* region = toml::detail::get_region(v);
  return region == nullptr ? std::string() : region->str();
}

// toml11 reports multi-line, ASCII-art errors; keep the first line without
// the library's function-name prefix.
std::string first_line(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  line = std::regex_replace(line, std::regex(R"(^\[error\]\s*)"), "");
  line = std::regex_replace(line, std::regex(R"(^toml::[A-Za-z_:]+:\s*)"), "");
  return line;
}

void flatten(const toml::value& node, const std::string& prefix, std::string_view source, const LineIndex& lines,
             std::vector<RawEntry>& out) {
  for (const auto& [name, child] : node.as_table()) {
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (child.is_table()) {
      flatten(child, key, source, lines, out);
      continue;
    }
    const auto line = lines.line(child);
    out.push_back({key, child, fmt::format("{}:{}", source, line), line,
                   child.is_floating() ? written_text(child) : std::string()});
  }
}

// A floating-point number as written, or +-inf when the text overflows a
// double (toml11 then returns the largest double, which would pass a range
// check that "1e400" must fail).
double real_value(const RawEntry& raw) {
  const double parsed = raw.value.as_floating();
  std::string digits;
  for (const char c : raw.written) {
    if (c != '_') digits += c;
  }
  if (digits.empty()) return parsed;
  errno = 0;
  const double exact = std::strtod(digits.c_str(), nullptr);
  return errno == ERANGE && std::isinf(exact) ? exact : parsed;
}

std::string type_of(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::integer:
      return fmt::format("an integer ({})", v.as_integer());
    case toml::value_t::floating:
      return fmt::format("a number ({})", v.as_floating());
    case toml::value_t::boolean:
      return v.as_boolean() ? "a boolean (true)" : "a boolean (false)";
    case toml::value_t::string:
      return fmt::format("a string (\"{}\")", v.as_string().str);
    case toml::value_t::array:
      return "a list";
    case toml::value_t::table:
      return "a table";
    default:
      return "a date or time";
  }
}

[[noreturn]] void wrong_type(const KeySpec& spec, const RawEntry& raw) {
  throw input_error(
      fmt::format("{}: {} must be {}, got {}", raw.origin, spec.name, describe(spec.type), type_of(raw.value)));
}

Value convert(const KeySpec& spec, const RawEntry& raw) {
  const toml::value& v = raw.value;
  switch (spec.type) {
    case ValueType::integer:
      if (v.is_string() && !spec.choices.empty()) return v.as_string().str;  // one of its words, checked next
      if (!v.is_integer()) wrong_type(spec, raw);
      return static_cast<std::int64_t>(v.as_integer());
    case ValueType::real:
      if (v.is_integer()) return static_cast<double>(v.as_integer());
      if (!v.is_floating()) wrong_type(spec, raw);
      return real_value(raw);
    case ValueType::boolean:
      if (!v.is_boolean()) wrong_type(spec, raw);
      return v.as_boolean();
    case ValueType::string:
      if (!v.is_string()) wrong_type(spec, raw);
      return v.as_string().str;
    case ValueType::integer_list: {
      if (!v.is_array()) wrong_type(spec, raw);
      IntegerList list;
      for (const auto& item : v.as_array()) {
        if (!item.is_integer()) {
          throw input_error(
              fmt::format("{}: {} must be a list of integers, but it holds {}", raw.origin, spec.name, type_of(item)));
        }
        list.push_back(item.as_integer());
      }
      return list;
    }
  }
  wrong_type(spec, raw);
}

bool in_range(const KeySpec& spec, double x) {
  if (!std::isfinite(x)) return false;
  if (spec.min && (spec.min_exclusive ? x <= *spec.min : x < *spec.min)) return false;
  if (spec.max && x > *spec.max) return false;
  return true;
}

void check_allowed(const KeySpec& spec, const Value& value, const std::string& origin, std::string_view written) {
  const auto out_of_range = [&] {
    return input_error(fmt::format("{}: {} = {} is out of range: must be {}", origin, spec.name,
                                   written.empty() ? to_toml(value) : std::string(written), allowed_values(spec)));
  };
  if (const auto* i = std::get_if<std::int64_t>(&value); i && !in_range(spec, static_cast<double>(*i))) {
    throw out_of_range();
  }
  if (const auto* r = std::get_if<double>(&value); r && !in_range(spec, *r)) throw out_of_range();
  if (const auto* list = std::get_if<IntegerList>(&value)) {
    for (const auto item : *list) {
      if (!in_range(spec, static_cast<double>(item))) throw out_of_range();
    }
  }
  if (const auto* s = std::get_if<std::string>(&value); s && !spec.choices.empty()) {
    if (std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
      const std::string near = nearest_match(*s, spec.choices);
      throw input_error(fmt::format("{}: {} = \"{}\" is not valid: must be {}{}", origin, spec.name, *s,
                                    allowed_values(spec),
                                    near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
    }
  }
}

const KeySpec& known_key(const std::string& key, const std::string& origin) {
  if (const KeySpec* spec = find_key(key)) return *spec;
  const std::string near = nearest_match(key, key_names());
  throw input_error(fmt::format("{}: unknown key '{}'{}; `kpipe deck --doc` lists every key", origin, key,
                                near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
}

toml::value parse_toml(std::string_view text, const std::string& source) {
  detail::check_toml_shape(text, source);
  std::istringstream stream{std::string(text)};
  try {
    return toml::parse(stream, source);
  } catch (const toml::exception& e) {
    throw input_error(fmt::format("{}:{}: TOML syntax error: {}", source, e.location().line(), first_line(e.what())));
  }
}

// Control characters in an override are a mistake (a pasted newline would
// silently end the value there); nothing in a deck value needs them.
void check_override_text(const std::string& text, const std::string& origin) {
  if (text.size() > limits::override_bytes) {
    throw input_error(
        fmt::format("{}...: an override of {} bytes; overrides are at most {} bytes, put long values "
                    "in the deck",
                    origin.substr(0, 60), text.size(), limits::override_bytes));
  }
  const auto bad = std::find_if(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  if (bad != text.end()) {
    throw input_error(
        fmt::format("{}: an override cannot hold control characters ({} at offset {}); write it "
                    "on one line without tabs or escapes",
                    origin, printable(std::string(1, *bad)), bad - text.begin()));
  }
}

RawEntry parse_override(const std::string& text) {
  const auto eq = text.find('=');
  // Long overrides (a list of thousands of widths) are cut short in messages, as bounded_line cuts values.
  const std::string origin = text.size() > limits::quoted_value_bytes
                                 ? fmt::format("command line '{}…' ({} bytes)",
                                               printable(text.substr(0, limits::quoted_value_head_bytes)), text.size())
                                 : fmt::format("command line '{}'", printable(text));
  check_override_text(text, origin);
  if (eq == std::string::npos || eq == 0) {
    throw input_error(fmt::format("{}: an override must be key=value, e.g. pipeline.stages=4", origin));
  }
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  const KeySpec& spec = known_key(key, origin);
  // Strings need no quotes on the command line: pipeline.schedule=gpipe, nor
  // the words of a number: train.microbatch_size=auto.
  std::string toml_text = "v = " + value_text;
  const bool word =
      !spec.choices.empty() && !value_text.empty() && std::isalpha(static_cast<unsigned char>(value_text.front()));
  if ((spec.type == ValueType::string && (value_text.empty() || value_text.front() != '"')) || word) {
    toml_text = "v = '" + value_text + "'";  // a TOML literal string: no escapes to worry about
  }
  detail::check_toml_shape(toml_text, origin, false);
  try {
    std::istringstream stream(toml_text);
    const toml::value table = toml::parse(stream, origin);
    return {key, table.as_table().at("v"), origin, 0, value_text};
  } catch (const toml::exception&) {
    throw input_error(
        fmt::format("{}: '{}' is not {} (the value of {})", origin, value_text, describe(spec.type), key));
  }
}

bool has_content(std::string_view text) {
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    const auto start = line.find_first_not_of(" \t\r");
    if (start != std::string::npos && line[start] != '#') return true;
  }
  return false;
}

}  // namespace

void Deck::set(const KeySpec& spec, Value value, std::string origin, std::string_view written) {
  check_allowed(spec, value, origin, written);
  entries_[spec.name] = Entry{std::move(value), std::move(origin)};
}

const Deck::Entry& Deck::entry(std::string_view key, ValueType type) const {
  const auto it = entries_.find(key);
  const KeySpec* spec = find_key(key);
  if (it == entries_.end() || spec == nullptr || spec->type != type) {
    throw runtime_error(fmt::format("internal: deck key '{}' read as {}, which the schema does not declare", key,
                                    config::describe(type)));
  }
  return it->second;
}

std::int64_t Deck::integer(std::string_view key) const {
  const Value& value = entry(key, ValueType::integer).value;
  if (const auto* w = std::get_if<std::string>(&value)) {
    throw runtime_error(fmt::format("internal: deck key '{}' is \"{}\", read it with word() first", key, *w));
  }
  return std::get<std::int64_t>(value);
}

std::optional<std::string> Deck::word(std::string_view key) const {
  const auto* w = std::get_if<std::string>(&entry(key, ValueType::integer).value);
  return w ? std::optional<std::string>(*w) : std::nullopt;
}
double Deck::real(std::string_view key) const { return std::get<double>(entry(key, ValueType::real).value); }
bool Deck::boolean(std::string_view key) const { return std::get<bool>(entry(key, ValueType::boolean).value); }
const std::string& Deck::string(std::string_view key) const {
  return std::get<std::string>(entry(key, ValueType::string).value);
}
const Value& Deck::value(std::string_view key) const {
  const KeySpec* spec = find_key(key);
  if (spec == nullptr) throw runtime_error(fmt::format("internal: deck key '{}' is not in the schema", key));
  return entry(key, spec->type).value;
}

const IntegerList& Deck::integers(std::string_view key) const {
  return std::get<IntegerList>(entry(key, ValueType::integer_list).value);
}

std::string Deck::origin(std::string_view key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? "default" : it->second.origin;
}

std::string Deck::describe(std::string_view key) const {
  const auto it = entries_.find(key);
  const std::string value = it == entries_.end() ? "?" : to_toml(it->second.value);
  return fmt::format("{} = {} ({})", key, value, origin(key));
}

std::string Deck::resolved_toml() const {
  std::string out;
  for (const auto& [key, e] : entries_) out += fmt::format("{} = {}\n", key, to_toml(e.value));
  return out;
}

Deck parse_deck(std::string_view text, std::string_view source_name, const std::vector<std::string>& overrides) {
  const std::string source(source_name);
  if (!has_content(text)) {
    throw input_error(fmt::format("{}: the deck sets no keys; start from inputs/quickstart.toml", source));
  }
  std::vector<RawEntry> raw;
  flatten(parse_toml(text, source), "", source, LineIndex(text), raw);
  // Report the first problem in file order, whatever order the table holds.
  std::stable_sort(raw.begin(), raw.end(), [](const RawEntry& a, const RawEntry& b) { return a.line < b.line; });

  Deck deck;
  deck.source_text_ = std::string(text);
  for (const auto& spec : schema()) deck.entries_[spec.name] = Deck::Entry{spec.default_value, "default"};
  for (const auto& entry : raw) {
    const KeySpec& spec = known_key(entry.key, entry.origin);
    deck.set(spec, convert(spec, entry), entry.origin, entry.written);
  }
  for (const auto& text_override : overrides) deck = with_override(std::move(deck), text_override);
  return deck;
}

Deck with_override(Deck deck, const std::string& assignment) {
  const RawEntry entry = parse_override(assignment);
  const KeySpec& spec = *find_key(entry.key);
  deck.set(spec, convert(spec, entry), entry.origin, entry.written);
  return deck;
}

}  // namespace kpipe::config
