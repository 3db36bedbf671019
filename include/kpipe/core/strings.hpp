#pragma once
// Small string helpers used for user-facing messages.

#include <string>
#include <string_view>
#include <vector>

namespace kpipe {

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is reasonably close.
std::string nearest_match(std::string_view word, const std::vector<std::string>& candidates);

// "a, b or c" for lists in messages.
std::string join_choices(const std::vector<std::string>& items, std::string_view last_separator = " or ");

// User-provided text as it may be shown on a terminal: control characters
// (ESC, newline, NUL, DEL, ...) and bytes that are not UTF-8 become \n, \t,
// \r or \xNN escapes, so quoting a file's or argument's content in a message
// can neither break the one-line error contract nor drive the terminal.
std::string printable(std::string_view text);

// The offset of the first byte of `text` that does not begin a valid UTF-8
// sequence (strict: no overlong forms, surrogates or code points past
// U+10FFFF), or npos when the whole text is UTF-8.
std::size_t invalid_utf8_offset(std::string_view text);

// An error line no longer than limits::error_line_bytes: each quoted value
// ('...' or "...", opened after a space, '=' or '(') of more than
// limits::quoted_value_bytes is cut to its head with its length stated
// ("xxxx…" (1000000 bytes)), and a line still too long is cut with its
// length stated. Cuts fall between UTF-8 characters.
std::string bounded_line(std::string_view line);

// How deeply the arrays and objects of JSON `text` nest (strings skipped),
// read without parsing, so that a reader can refuse a line nested beyond
// limits::json_depth before a recursive parser or printer sees it.
std::size_t json_depth(std::string_view text);

}  // namespace kpipe
