#include "kpipe/schedule/timeline.hpp"

#include <algorithm>

namespace kpipe::schedule {

Timeline simulated_timeline(const Schedule& schedule, const SimulationResult& result) {
  Timeline timeline;
  timeline.name = schedule.name;
  timeline.p = schedule.p;
  timeline.v = schedule.v;
  timeline.m = schedule.m;
  timeline.ranks.resize(static_cast<std::size_t>(schedule.p));
  for (int r = 0; r < schedule.p; ++r) {
    const auto& actions = schedule.ranks[r];
    auto& timed = timeline.ranks[r];
    timed.reserve(actions.size());
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      timed.push_back(
          {a, a.chunk >= 0 ? schedule.placement.stage(r, a.chunk) : -1, -1, result.start(r, i), result.end[r][i]});
    }
  }
  timeline.makespan = result.makespan;
  timeline.bubble = result.bubble();
  return timeline;
}

void summarize(Timeline& timeline) {
  double busy = 0.0, makespan = 0.0;
  for (const auto& actions : timeline.ranks) {
    for (const TimedAction& t : actions) {
      if (!is_compute(t.action.kind) && t.action.kind != ActionKind::loss) continue;
      busy += t.end - t.start;
      makespan = std::max(makespan, t.end);
    }
  }
  const double total = timeline.p * makespan;
  timeline.makespan = makespan;
  timeline.bubble.idle_over_useful = busy > 0.0 ? (total - busy) / busy : 0.0;
  timeline.bubble.idle_over_total = total > 0.0 ? (total - busy) / total : 0.0;
}

}  // namespace kpipe::schedule
