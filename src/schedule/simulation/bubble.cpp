#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

Bubble SimulationResult::bubble() const {
  if (total_busy <= 0.0 || makespan <= 0.0) return {};
  return {total_idle / total_busy, total_idle / (total_busy + total_idle)};
}

Bubble SimulationResult::span_bubble() const {
  double busy = 0.0, span = 0.0;
  for (const RankStats& rank : ranks) {
    busy += rank.busy;
    span += rank.span;
  }
  if (busy <= 0.0 || span <= 0.0) return {};
  return {(span - busy) / busy, (span - busy) / span};
}

// The registered schedule's formula with the costs of one model stage;
// hand-written schedules (names the registry does not know) have none.
std::optional<TheoreticalBubble> theoretical_bubble(const Schedule& schedule, const CostModel& costs) {
  const ScheduleInfo* info = schedule.entry ? schedule.entry : registered_schedule(schedule.name);
  if (!info) return std::nullopt;
  return info->bubble(schedule.p, schedule.v, schedule.m,
                      {costs.forward, costs.backward_input, costs.backward_weight, costs.overlap});
}

}  // namespace kpipe::schedule
