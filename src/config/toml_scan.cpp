#include "toml_scan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kpipe/config/schema.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::config::detail {

namespace {

class ShapeScan {
 public:
  ShapeScan(std::string_view text, const std::string& where, bool with_line)
      : text_(text), where_(where), with_line_(with_line) {}

  void run() {
    // TOML is UTF-8, and toml11 reads past its buffer on some invalid bytes in strings.
    if (const std::size_t bad = invalid_utf8_offset(text_); bad != std::string_view::npos) {
      line_ += static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(bad), '\n'));
      fail(fmt::format("not UTF-8 text (byte {} is 0x{:02x}); a deck is UTF-8: convert it (iconv -t UTF-8)", bad,
                       static_cast<unsigned char>(text_[bad])));
    }
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '#') {
        skip_comment();
      } else if (c == '"' || c == '\'') {
        skip_string(c);
        continue;
      } else {
        structure(c);
      }
      ++at_;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(with_line_ ? fmt::format("{}:{}: {}", where_, line_, what) : fmt::format("{}: {}", where_, what));
  }

  bool starts(std::string_view token) const { return text_.substr(at_, token.size()) == token; }

  void newline() {
    ++line_;
    dots_ = 0;
  }

  void skip_comment() {
    while (at_ + 1 < text_.size() && text_[at_ + 1] != '\n') ++at_;
  }

  // Leaves at_ after the closing quote. A single-line string ends at a
  // newline too: it is a syntax error that toml11 reports with its line.
  void skip_string(char quote) {
    const std::string triple(3, quote);
    const bool multiline = starts(triple);
    at_ += multiline ? 3 : 1;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (multiline && starts(triple)) {
        at_ += 3;
        return;
      }
      if (!multiline && c == quote) {
        ++at_;
        return;
      }
      if (c == '\n') {
        if (!multiline) return;
        newline();
      }
      if (c == '\\' && quote == '"' && at_ + 1 < text_.size()) {
        ++at_;
        if (text_[at_] == '\n') newline();
      }
      ++at_;
    }
  }

  // The key or [table] header of the top level being read, spaces left out
  // (quoted parts are skipped with the strings: deck keys are bare).
  void track_key(char c) {
    if (!open_.empty() && !header_) return;
    if (c == ' ' || c == '\t' || c == '\r' || c == '[' || c == ']') return;
    if (header_) {
      header_text_ += c;
    } else if (!in_value_) {
      key_ += c;
    }
  }

  // toml11 dereferences an empty list when a later key extends a key that
  // holds a value (`o = []` then `o.l = 1`): TOML forbids it, so say so first.
  void check_extends(const std::string& path) {
    for (const std::string& set : assigned_) {
      if (path.size() > set.size() && path.compare(0, set.size(), set) == 0 && path[set.size()] == '.') {
        fail(
            fmt::format("'{}' extends '{}', which already holds a value; a key holds one value or a table, "
                        "not both",
                        printable(path), printable(set)));
      }
    }
  }

  void structure(char c) {
    track_key(c);
    switch (c) {
      case '\n':
        if (open_.empty()) {
          key_.clear();
          in_value_ = false;
        }
        newline();
        break;
      case '[':
      case '{':
        open(c);
        break;
      case ']':
      case '}':
        if (!open_.empty()) open_.pop_back();
        if (header_ && open_.empty()) {
          header_ = false;
          table_ = header_text_;
          check_extends(table_);
        }
        dots_ = 0;
        break;
      case ',':
        if (!open_.empty() && open_.back().list && ++open_.back().entries >= limits::toml_list_entries) {
          fail(
              fmt::format("a list with more than {} entries; the longest list a deck needs has one entry per "
                          "model stage (model.hidden, pipeline.partition)",
                          limits::toml_list_entries));
        }
        dots_ = 0;
        break;
      case '=':
        count_key();
        if (open_.empty() && !in_value_) {
          key_.pop_back();  // the '=' itself
          const std::string path = table_.empty() ? key_ : table_ + "." + key_;
          check_extends(path);
          assigned_.push_back(path);
          in_value_ = true;
        }
        dots_ = 0;
        break;
      case '.':
        if (++dots_ >= limits::toml_dotted_key_parts) {
          fail(fmt::format("a dotted key of more than {} parts; deck keys have two, e.g. pipeline.stages",
                           limits::toml_dotted_key_parts));
        }
        break;
      default:
        break;
    }
  }

  void count_key() {
    if (++keys_ > limits::toml_keys) {
      fail(
          fmt::format("more than {} keys; a deck sets at most the {} keys of the schema (`kpipe deck --doc` "
                      "lists them)",
                      limits::toml_keys, schema().size()));
    }
  }

  void open(char c) {
    // A [table] header at the top level is a key of its own.
    if (c == '[' && open_.empty()) {
      count_key();
      if (!in_value_) {
        header_ = true;
        header_text_.clear();
      }
    }
    open_.push_back({c == '[', 0});
    dots_ = 0;
    if (open_.size() > static_cast<std::size_t>(limits::toml_nesting_depth)) {
      fail(
          fmt::format("lists and tables nest more than {} levels deep; a deck needs one level, e.g. "
                      "model.hidden = [256, 256]",
                      limits::toml_nesting_depth));
    }
  }

  struct Open {
    bool list;            // '[' rather than '{'
    std::size_t entries;  // commas seen at this level
  };

  std::string_view text_;
  const std::string& where_;
  bool with_line_;
  std::size_t at_ = 0;
  int line_ = 1;
  int dots_ = 0;  // dots since the last key, value or bracket boundary
  std::size_t keys_ = 0;
  std::vector<Open> open_;
  std::string key_;                    // the top-level key read so far on this line
  bool in_value_ = false;              // after its '=' until the line ends
  bool header_ = false;                // inside a [table] or [[table]] header
  std::string header_text_, table_;    // the header being read; the current table
  std::vector<std::string> assigned_;  // every key set to a value, with its table
};

}  // namespace

void check_toml_shape(std::string_view text, const std::string& where, bool with_line) {
  ShapeScan(text, where, with_line).run();
}

}  // namespace kpipe::config::detail
