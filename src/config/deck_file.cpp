#include "kpipe/config/deck.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"

namespace kpipe::config {

namespace {
std::int64_t reads = 0;
}  // namespace

std::int64_t deck_files_read() { return reads; }

std::string read_deck_file(const std::string& path) {
  ++reads;
  return read_input_file(path, {"deck", limits::deck_bytes, "; check the path (decks live in inputs/)"});
}

}  // namespace kpipe::config
