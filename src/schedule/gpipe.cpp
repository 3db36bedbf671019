#include "generators.hpp"

namespace kpipe::schedule::detail {

// GPipe: every forward, then every full backward. Backwards run in ascending
// microbatch order so that weight gradients accumulate in that order too.
void gpipe(const ScheduleSpec& spec, int /*rank*/, std::vector<Action>& out) {
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::forward, j, 0));
  for (int j = 0; j < spec.m; ++j) out.push_back(compute_action(ActionKind::backward, j, 0));
}

}  // namespace kpipe::schedule::detail
