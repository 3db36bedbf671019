#include "generators.hpp"

namespace kpipe::schedule::detail {

// Inference and evaluation: every rank forwards the microbatches in order.
void forward_only(const ScheduleSpec& spec, int /*rank*/, std::vector<Action>& out) {
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::forward, j, 0));
}

}  // namespace kpipe::schedule::detail
