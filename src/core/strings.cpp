#include "kpipe/core/strings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "kpipe/core/limits.hpp"

namespace kpipe {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(3, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string join_choices(const std::vector<std::string>& items, std::string_view last_separator) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += (i + 1 == items.size()) ? std::string(last_separator) : std::string(", ");
    text += items[i];
  }
  return text;
}

namespace {

// Length of the valid UTF-8 sequence starting at text[i] (1 to 4), or 0.
// Strict (RFC 3629): no overlong forms, surrogates or code points past U+10FFFF.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  // The second byte's range narrows after E0 (overlong), ED (surrogates), F0 (overlong), F4 (past U+10FFFF).
  const auto second = static_cast<unsigned char>(text[i + 1]);
  const unsigned char low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
  const unsigned char high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
  if (second < low || second > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return 0;
  }
  return n;
}

}  // namespace

std::size_t invalid_utf8_offset(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    if (n > 1 || (n == 1 && c >= 0x20 && c != 0x7f)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
    ++i;
  }
  return out;
}

std::size_t json_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

namespace {

// The longest prefix of `text` of at most `bytes` bytes that ends between UTF-8 characters.
std::string_view utf8_head(std::string_view text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  std::size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// A quote at `i` opens a value after a space, '=', '(' or ':' (not an apostrophe inside a word) ...
bool opens(std::string_view line, std::size_t i) {
  return i == 0 || std::string_view(" =(:").find(line[i - 1]) != std::string_view::npos;
}

// ... and closes it before a space or punctuation, or at the end.
bool closes(std::string_view line, std::size_t j) {
  return j + 1 == line.size() || std::string_view(" :,;.)").find(line[j + 1]) != std::string_view::npos;
}

}  // namespace

std::string bounded_line(std::string_view line) {
  std::string out;
  // Past this offset a quote of that kind closes nothing: a later opening need not look again.
  std::size_t unclosed[2] = {std::string_view::npos, std::string_view::npos};
  for (std::size_t i = 0; i < line.size();) {
    const char quote = line[i];
    const int kind = quote == '"' ? 1 : 0;
    if ((quote == '\'' || quote == '"') && opens(line, i) && i < unclosed[kind]) {
      std::size_t j = line.find(quote, i + 1);
      while (j != std::string_view::npos && !closes(line, j)) j = line.find(quote, j + 1);
      if (j == std::string_view::npos) {
        unclosed[kind] = i;
      } else {
        const std::string_view value = line.substr(i + 1, j - i - 1);
        if (value.size() > limits::quoted_value_bytes) {
          out += fmt::format("{0}{1}…{0} ({2} bytes)", quote, utf8_head(value, limits::quoted_value_head_bytes),
                             value.size());
        } else {
          out.append(line.substr(i, j - i + 1));
        }
        i = j + 1;
        continue;
      }
    }
    out += quote;
    ++i;
  }
  if (out.size() > limits::error_line_bytes) {
    const std::string note = fmt::format("… ({} bytes in all)", out.size());
    out = std::string(utf8_head(out, limits::error_line_bytes - note.size())) + note;
  }
  return out;
}

}  // namespace kpipe
