#pragma once
// Number formats and action labels shared by the text renderers.

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kpipe/schedule/action.hpp"

namespace kpipe::schedule::detail {

// "F3", "F3.1" (chunk 1 when v > 1), "SEND_ACT3", "F5.0&BW2.1" (an F&B by
// its halves); a step-level action by its name alone ("REDUCE_GRADS").
inline std::string action_label(const Action& a, int v) {
  if (is_step_level(a.kind)) return std::string(name(a.kind));
  if (a.kind == ActionKind::forward_backward) {
    return action_label(forward_half(a), v) + "&" + action_label(backward_half(a), v);
  }
  return v > 1 ? fmt::format("{}{}.{}", name(a.kind), a.microbatch, a.chunk)
               : fmt::format("{}{}", name(a.kind), a.microbatch);
}

// Simulated times: integers print as integers, others with up to 4 decimals.
inline std::string format_time(double t) {
  std::string text = fmt::format("{:.4f}", t);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

inline std::string format_bytes(std::int64_t bytes) {
  constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

// The smallest round step (1, 2 or 5 times a power of ten) of at least
// `minimum`, for axis ticks.
inline double round_step(double minimum) {
  const double power = std::pow(10.0, std::floor(std::log10(minimum)));
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (power * factor >= minimum) return power * factor;
  }
  return power * 10.0;
}

}  // namespace kpipe::schedule::detail
