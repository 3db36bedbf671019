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

}  // namespace kpipe
