// Steps without a barrier between them (train.post_validation): the same
// action lists run back to back, each step's microbatches numbered on from
// the last step's (and their message tags with them), so the simulator sees
// a rank start step k+1 as soon as its own step k ends while its neighbours
// still work on step k.

#include <algorithm>

#include "kpipe/schedule/action.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

namespace {

Schedule back_to_back(const Schedule& schedule, int steps) {
  Schedule repeated = schedule;
  repeated.m = schedule.m * steps;
  // tag = 2·(microbatch·v + chunk) + direction: m more microbatches shift it by 2·v·m.
  const int tag_shift = 2 * schedule.v * schedule.m;
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    auto& actions = repeated.ranks[r];
    actions.clear();
    for (int k = 0; k < steps; ++k) {
      for (Action a : schedule.ranks[r]) {
        if (a.microbatch >= 0) a.microbatch += k * schedule.m;
        if (is_communication(a.kind)) a.tag += k * tag_shift;
        if (a.kind == ActionKind::forward_backward) a.tag += k * schedule.m;  // its BW's microbatch
        actions.push_back(a);
      }
    }
  }
  return repeated;
}

}  // namespace

Bubble post_validated_bubble(const Schedule& schedule, const CostModel& costs, int steps) {
  const SimulationResult r = simulate(back_to_back(schedule, steps), costs);
  const int p = static_cast<int>(schedule.ranks.size());
  // Steady state: the last step's period on the slowest rank, which every rank
  // keeps. A rank running its optimizer is not idle: the step's tail is out of
  // the bubble, as it is after a barrier's makespan.
  double period = 0.0, busy = 0.0;
  for (int rank = 0; rank < p; ++rank) {
    const std::size_t n = schedule.ranks[rank].size();
    period = std::max(period, r.end[rank][steps * n - 1] - r.end[rank][(steps - 1) * n - 1]);
    busy += r.ranks[rank].busy / steps;
  }
  const double pipelined = period - costs.optimizer_step;
  const double idle = std::max(0.0, p * pipelined - busy);
  return {busy > 0.0 ? idle / busy : 0.0, pipelined > 0.0 ? idle / (p * pipelined) : 0.0};
}

}  // namespace kpipe::schedule
