#pragma once
// The valid alternative a message offers for a width that must divide another.

#include <cstdint>
#include <cstdlib>
#include <initializer_list>

namespace kpipe::config::detail {

// The divisor of n closest to b (ties go to the smaller one).
inline std::int64_t nearest_divisor(std::int64_t n, std::int64_t b) {
  std::int64_t best = 1;
  for (std::int64_t k = 1; k * k <= n; ++k) {
    if (n % k != 0) continue;
    for (const std::int64_t candidate : {k, n / k}) {
      const auto better = std::llabs(candidate - b) < std::llabs(best - b) ||
                          (std::llabs(candidate - b) == std::llabs(best - b) && candidate < best);
      if (better) best = candidate;
    }
  }
  return best;
}

}  // namespace kpipe::config::detail
