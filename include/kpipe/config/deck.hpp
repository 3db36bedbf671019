#pragma once
// A resolved input deck: every schema key with its value and where the value
// came from (a deck line, the command line, or the default).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/config/schema.hpp"

namespace kpipe::config {

class Deck {
 public:
  std::int64_t integer(std::string_view key) const;
  // An integer key that also takes words (train.microbatch_size = "auto"):
  // the word, or nothing when the deck gives a number.
  std::optional<std::string> word(std::string_view key) const;
  double real(std::string_view key) const;
  bool boolean(std::string_view key) const;
  const std::string& string(std::string_view key) const;
  const IntegerList& integers(std::string_view key) const;
  // Any key's value, as its schema type holds it.
  const Value& value(std::string_view key) const;

  // "quickstart.toml:7", "command line" or "default": for messages.
  std::string origin(std::string_view key) const;
  // A one-line message prefix: "pipeline.stages = 0 (quickstart.toml:7)".
  std::string describe(std::string_view key) const;

  // The deck as the user wrote it, and every key resolved, as TOML text.
  const std::string& source_text() const { return source_text_; }
  std::string resolved_toml() const;

  // Used by the parser only.
  struct Entry {
    Value value;
    std::string origin;
  };
  // `written` is the value as the user wrote it, shown when it is out of range.
  void set(const KeySpec& spec, Value value, std::string origin, std::string_view written = {});

 private:
  friend Deck parse_deck(std::string_view, std::string_view, const std::vector<std::string>&);
  friend Deck with_override(Deck, const std::string&);
  const Entry& entry(std::string_view key, ValueType type) const;

  std::map<std::string, Entry, std::less<>> entries_;
  std::string source_text_;
};

// Parse deck text (TOML with dotted keys), then apply command-line overrides
// of the form key=value. Every problem is an input error naming key and line.
Deck parse_deck(std::string_view text, std::string_view source_name, const std::vector<std::string>& overrides = {});

// `deck` with one more command-line style override ("train.microbatch_size=8"),
// checked like those parse_deck applies; the deck is not read again.
Deck with_override(Deck deck, const std::string& assignment);

// Read a deck file as text; a missing, unreadable or binary file is an input error.
std::string read_deck_file(const std::string& path);
// Deck files read so far in this process: a run reads its deck once, also
// when it measures train.microbatch_size = "auto" (`kpipe run --json` reports it).
std::int64_t deck_files_read();

}  // namespace kpipe::config
