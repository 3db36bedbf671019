#pragma once
// Reading a user's input file (a deck, a schedule file) as text, with every
// way it can be wrong reported as one input error: the real reason a path
// cannot be opened (no such file, a symlink loop, a name too long, permission
// denied), not a regular file, too large, or not UTF-8 text. A UTF-8 byte
// order mark is dropped.

#include <cstddef>
#include <string>

namespace kpipe {

struct InputFile {
  const char* what;  // "deck", "schedule file": names the file in messages
  std::size_t max_bytes;
  const char* hint;  // appended to "no such file", e.g. "; decks live in inputs/"
};

std::string read_input_file(const std::string& path, const InputFile& kind);
// The bytes of a binary input file (a tokenizer model), with the same checks
// but the text ones.
std::string read_input_bytes(const std::string& path, const InputFile& kind);

// Offset of the first byte that cannot be in a UTF-8 text file (a control
// character other than tab, newline and carriage return, or a broken UTF-8
// sequence), or npos.
std::size_t first_non_text_byte(const std::string& text);

}  // namespace kpipe
