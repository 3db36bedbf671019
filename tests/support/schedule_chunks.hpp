#pragma once
// The model chunks per rank the training tests run a schedule with.

#include <algorithm>
#include <array>
#include <string>

namespace kpipe::test {

// Two for the interleaved schedule and the V's (zb-v, v-half, v-min,
// dualpipe-v), one for the rest.
inline int chunks_for(const std::string& schedule) {
  constexpr std::array<const char*, 5> two_chunks = {"interleaved", "zb-v", "v-half", "v-min", "dualpipe-v"};
  return std::any_of(two_chunks.begin(), two_chunks.end(), [&](const char* name) { return schedule == name; }) ? 2 : 1;
}

}  // namespace kpipe::test
