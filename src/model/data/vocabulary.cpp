#include "kpipe/model/data/vocabulary.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"

namespace kpipe::model {

namespace {

[[noreturn]] void bad_utf8(std::string_view what, std::size_t offset, unsigned char byte, const char* why) {
  throw input_error(
      fmt::format("{} is not valid UTF-8: byte {} (0x{:02x}) {}; convert it to UTF-8 (e.g. iconv -t "
                  "UTF-8)",
                  what, offset, byte, why));
}

// 'a' (U+0061) for printable ASCII, U+000A for the rest: messages stay one readable line.
std::string describe(char32_t symbol) {
  const auto code = static_cast<std::uint32_t>(symbol);
  if (code >= 0x20 && code < 0x7f) return fmt::format("'{}' (U+{:04X})", static_cast<char>(code), code);
  if (code < 0xa0) return fmt::format("U+{:04X}", code);  // control characters
  std::string text = "'";
  append_utf8(text, symbol);
  return text + fmt::format("' (U+{:04X})", code);
}

}  // namespace

void for_each_code_point(std::string_view utf8, std::string_view what, FunctionRef<void(char32_t)> visit) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(utf8.data());
  const std::size_t n = utf8.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      visit(lead);
      ++i;
      continue;
    }
    // Sequence length and the smallest code point it may encode (shorter forms are overlong).
    int length = 0;
    char32_t minimum = 0;
    char32_t code = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2, minimum = 0x80, code = lead & 0x1fU;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3, minimum = 0x800, code = lead & 0x0fU;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4, minimum = 0x10000, code = lead & 0x07U;
    } else {
      bad_utf8(what, i, lead, lead < 0xc0 ? "is a continuation byte with no lead byte" : "starts no character");
    }
    if (n - i < static_cast<std::size_t>(length)) bad_utf8(what, i, lead, "starts a sequence cut off by the end");
    for (int k = 1; k < length; ++k) {
      const unsigned char next = bytes[i + k];
      if ((next & 0xc0U) != 0x80) bad_utf8(what, i + k, next, "should continue the sequence before it");
      code = (code << 6) | (next & 0x3fU);
    }
    if (code < minimum) bad_utf8(what, i, lead, "starts an overlong encoding");
    if (code > 0x10ffff) bad_utf8(what, i, lead, "starts a code point past U+10FFFF");
    if (code >= 0xd800 && code <= 0xdfff) bad_utf8(what, i, lead, "starts an encoded surrogate");
    visit(code);
    i += static_cast<std::size_t>(length);
  }
}

std::vector<char32_t> decode_utf8(std::string_view utf8, std::string_view what) {
  std::vector<char32_t> out;
  out.reserve(utf8.size());
  for_each_code_point(utf8, what, [&](char32_t c) { out.push_back(c); });
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  const auto c = static_cast<std::uint32_t>(code_point);
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

Vocabulary::Vocabulary(std::vector<char32_t> symbols) : symbols_(std::move(symbols)), ascii_(128, -1) {
  for (std::size_t id = 0; id < symbols_.size(); ++id) {
    const char32_t symbol = symbols_[id];
    if (symbol > 0x10ffff || (symbol >= 0xd800 && symbol <= 0xdfff)) {
      throw input_error(
          fmt::format("vocabulary symbol {} is U+{:X}, which is no Unicode scalar value; a vocabulary "
                      "holds characters",
                      id, static_cast<std::uint32_t>(symbol)));
    }
    if (id_of(symbol) >= 0) {
      throw input_error(fmt::format("the vocabulary holds {} twice (tokens {} and {}); each symbol must be one token",
                                    describe(symbol), id_of(symbol), id));
    }
    if (symbol < 128) {
      ascii_[symbol] = static_cast<std::int32_t>(id);
    } else {
      rest_[symbol] = static_cast<std::int32_t>(id);
    }
  }
}

Vocabulary Vocabulary::of_text(std::string_view utf8, std::string_view what) {
  // One bit per code point (136 KiB) rather than a sorted copy of the text.
  std::vector<bool> seen(0x110000);
  for_each_code_point(utf8, what, [&](char32_t c) { seen[c] = true; });
  std::vector<char32_t> symbols;
  for (char32_t c = 0; c < seen.size(); ++c) {
    if (seen[c]) symbols.push_back(c);
  }
  return Vocabulary(std::move(symbols));
}

int Vocabulary::id_of(char32_t symbol) const {
  if (symbol < 128) return ascii_.empty() ? -1 : ascii_[symbol];
  const auto found = rest_.find(symbol);
  return found == rest_.end() ? -1 : found->second;
}

std::string Vocabulary::description() const { return fmt::format("{} distinct characters", size()); }

std::vector<std::int32_t> Vocabulary::encode(std::string_view utf8, std::string_view what) const {
  std::vector<std::int32_t> ids;
  ids.reserve(utf8.size());  // exact for ASCII; decoded on the fly, so no code points are held
  for_each_code_point(utf8, what, [&](char32_t c) {
    const int id = id_of(c);
    if (id < 0) {
      throw input_error(
          fmt::format("{} has {} at character {}, which is not in the vocabulary of {} symbols; use "
                      "only characters of the training data",
                      what, describe(c), ids.size(), size()));
    }
    ids.push_back(id);
  });
  ids.shrink_to_fit();
  return ids;
}

std::string Vocabulary::decode(const std::int32_t* ids, std::size_t count) const {
  std::string out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= size()) {
      throw input_error(
          fmt::format("token {} of {} is id {}, outside the vocabulary's [0, {}); decode with the "
                      "vocabulary the model was trained on",
                      i, count, ids[i], size()));
    }
    append_utf8(out, symbols_[static_cast<std::size_t>(ids[i])]);
  }
  return out;
}

std::string Vocabulary::utf8() const {
  std::string out;
  for (const char32_t symbol : symbols_) append_utf8(out, symbol);
  return out;
}

}  // namespace kpipe::model
