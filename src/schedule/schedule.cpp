#include "kpipe/schedule/schedule.hpp"

#include <algorithm>

namespace kpipe::schedule {

std::size_t Schedule::action_count() const {
  std::size_t count = 0;
  for (const auto& actions : ranks) count += actions.size();
  return count;
}

bool Schedule::training() const {
  return std::any_of(ranks.begin(), ranks.end(), [](const std::vector<Action>& actions) {
    return std::any_of(actions.begin(), actions.end(), [](const Action& a) {
      return releases_stash(a.kind) || a.kind == ActionKind::backward_weight || a.kind == ActionKind::forward_backward;
    });
  });
}

}  // namespace kpipe::schedule
