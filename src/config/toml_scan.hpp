#pragma once
// The shape checks a TOML text must pass before toml11 parses it: toml11
// parses nesting by recursion (thousands of '[' overflow the stack) and
// spends time per list entry that grows with the length of its line, so
// deep nesting, long dotted keys, long lists and many keys are refused here,
// in one linear scan, with the line they are on (limits in core/limits.hpp).

#include <string>
#include <string_view>

namespace kpipe::config::detail {

// Throws an input error "<where>:<line>: ..." (or "<where>: ..." when
// `with_line` is false, for one-line command-line overrides).
void check_toml_shape(std::string_view text, const std::string& where, bool with_line = true);

}  // namespace kpipe::config::detail
