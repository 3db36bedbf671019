#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kpipe/config/deck.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::config {

namespace {

constexpr std::uintmax_t max_deck_bytes = 1 << 20;

// Offset of the first byte that cannot be in a UTF-8 text deck, or npos.
std::size_t first_non_text_byte(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) return i;
    const int continuation = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (continuation < 0 || i + continuation >= text.size()) return i;
    for (int k = 1; k <= continuation; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return i;
    }
    i += continuation + 1;
  }
  return std::string::npos;
}

}  // namespace

std::string read_deck_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw input_error(fmt::format("cannot open deck '{}': no such file; check the path (decks live in inputs/)", path));
  }
  if (!fs::is_regular_file(path, ec)) {
    throw input_error(fmt::format("cannot read deck '{}': it is not a regular file", path));
  }
  if (const auto size = fs::file_size(path, ec); !ec && size > max_deck_bytes) {
    throw input_error(fmt::format("deck '{}' is {} bytes; a deck is a small TOML text file (at most {} bytes)", path,
                                  size, max_deck_bytes));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw input_error(fmt::format("cannot open deck '{}': {}", path, std::strerror(errno)));
  std::ostringstream buffer;
  buffer << file.rdbuf();
  std::string text = buffer.str();
  if (const auto at = first_non_text_byte(text); at != std::string::npos) {
    throw input_error(fmt::format("deck '{}' is not a UTF-8 text file (byte 0x{:02x} at offset {}); pass a TOML deck",
                                  path, static_cast<unsigned char>(text[at]), at));
  }
  return text;
}

}  // namespace kpipe::config
