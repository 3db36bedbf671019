// Steps without a barrier between them (train.post_validation): the
// simulator runs the action lists back to back, so a rank starts step k+1 as
// soon as its own step k ends while its neighbours still work on step k.

#include <algorithm>

#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

Bubble post_validated_bubble(const Schedule& schedule, const CostModel& costs, int steps) {
  const SimulationResult r = simulate(schedule, costs, Record::summary, steps);
  const int p = static_cast<int>(schedule.ranks.size());
  // Steady state: the last step's period on the slowest rank, which every rank
  // keeps. A rank running its optimizer is not idle: the step's tail is out of
  // the bubble, as it is after a barrier's makespan.
  double period = 0.0, busy = 0.0;
  for (int rank = 0; rank < p; ++rank) {
    const auto& ends = r.step_end[rank];
    period = std::max(period, ends[steps - 1] - ends[steps - 2]);
    busy += r.ranks[rank].busy / steps;
  }
  const double pipelined = period - costs.optimizer_step;
  const double idle = std::max(0.0, p * pipelined - busy);
  return {busy > 0.0 ? idle / busy : 0.0, pipelined > 0.0 ? idle / (p * pipelined) : 0.0};
}

}  // namespace kpipe::schedule
