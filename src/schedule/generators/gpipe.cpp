#include <fmt/format.h>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// GPipe: every forward, then every full backward. Backwards run in ascending
// microbatch order so that weight gradients accumulate in that order too.
void gpipe(const ScheduleSpec& spec, int /*rank*/, std::vector<Action>& out) {
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::forward, j, 0));
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::backward, j, 0));
}

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, "gpipe"); }

// DESIGN.md §1: each rank idles p-1 forward and backward slots while the
// pipeline fills and drains, against m slots of work.
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& /*costs*/) {
  return bubble_from_ratio((p - 1.0) / m, "(p-1)/m");
}

// GPipe's rule of thumb (Huang et al.): m >= 4p keeps the bubble small.
std::optional<std::string> advice(const ShapeCheck& shape) {
  if (shape.m >= 4 * shape.p) return std::nullopt;
  return fmt::format(
      "GPipe with m = {} < 4p = {} microbatches leaves a large bubble ({:.0f}% of the step idle); use "
      "more microbatches or 1f1b",
      shape.m, 4 * shape.p, 100.0 * (shape.p - 1) / (shape.m + shape.p - 1));
}

}  // namespace

const ScheduleInfo& gpipe_info() {
  static const ScheduleInfo info{"gpipe", "all forwards, then all full backwards (GPipe); stashes all m microbatches",
                                 true,    per_rank<gpipe>,
                                 check,   looped_placement,
                                 bubble,  advice};
  return info;
}

}  // namespace kpipe::schedule::detail
