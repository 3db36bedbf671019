#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// Inference and evaluation: every rank forwards the microbatches in order.
void forward_only(const ScheduleSpec& spec, int /*rank*/, std::vector<Action>& out) {
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::forward, j, 0));
}

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, "forward"); }

std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& /*costs*/) {
  return bubble_from_ratio((p - 1.0) / m, "(p-1)/m");
}

}  // namespace

const ScheduleInfo& forward_only_info() {
  static const ScheduleInfo info{"forward", "forward passes only, for inference and evaluation",
                                 false,     per_rank<forward_only>,
                                 check,     looped_placement,
                                 bubble};
  return info;
}

}  // namespace kpipe::schedule::detail
