#include <fmt/format.h>

#include <algorithm>

#include "generators.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::schedule::detail {

PlanTiming time_plan(const std::vector<std::vector<Action>>& plan, const Placement& placement,
                     const PlanningCosts& costs, int m) {
  const int p = placement.p();
  const int last = placement.stage_count() - 1;
  constexpr double pending = -1.0;
  std::vector<double> forward_end(static_cast<std::size_t>(placement.stage_count()) * m, pending);
  std::vector<double> backward_end(forward_end.size(), pending);
  const auto at = [m](int stage, int j) { return static_cast<std::size_t>(stage) * m + j; };
  // When the result of `stage` reaches `rank`: a message to another rank costs the latency.
  const auto arrival = [&](const std::vector<double>& ends, int stage, int j, int rank) {
    const double end = ends[at(stage, j)];
    if (end == pending) return pending;
    return placement.place(stage).rank == rank ? end : end + costs.latency;
  };

  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> clock(static_cast<std::size_t>(p), 0.0), first(static_cast<std::size_t>(p), -1.0),
      busy(static_cast<std::size_t>(p), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const auto& actions = plan[static_cast<std::size_t>(r)];
      for (std::size_t& k = next[static_cast<std::size_t>(r)]; k < actions.size(); ++k) {
        const Action& a = actions[k];
        const int s = placement.stage(r, a.chunk);
        double ready = clock[static_cast<std::size_t>(r)];
        double cost = costs.forward;
        if (a.kind == ActionKind::forward) {
          const double input = s == 0 ? 0.0 : arrival(forward_end, s - 1, a.microbatch, r);
          if (input == pending) break;
          ready = std::max(ready, input);
        } else if (a.kind == ActionKind::backward_input) {
          const double gradient = s == last ? 0.0 : arrival(backward_end, s + 1, a.microbatch, r);
          if (gradient == pending || forward_end[at(s, a.microbatch)] == pending) break;
          ready = std::max({ready, gradient, forward_end[at(s, a.microbatch)]});
          cost = costs.backward_input;
        } else {
          if (backward_end[at(s, a.microbatch)] == pending) break;
          ready = std::max(ready, backward_end[at(s, a.microbatch)]);
          cost = costs.backward_weight;
        }
        if (first[static_cast<std::size_t>(r)] < 0.0) first[static_cast<std::size_t>(r)] = ready;
        clock[static_cast<std::size_t>(r)] = ready + cost;
        busy[static_cast<std::size_t>(r)] += cost;
        if (a.kind == ActionKind::forward) forward_end[at(s, a.microbatch)] = ready + cost;
        if (a.kind == ActionKind::backward_input) backward_end[at(s, a.microbatch)] = ready + cost;
        progress = true;
      }
    }
  }
  PlanTiming timing;
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (next[i] != plan[i].size()) {
      throw runtime_error(fmt::format("a planned schedule deadlocks at rank {}, action {}", r, next[i]));
    }
    const double span = clock[i] - std::max(first[i], 0.0);
    if (span > 0.0) timing.worst_span_bubble = std::max(timing.worst_span_bubble, (span - busy[i]) / span);
    timing.makespan = std::max(timing.makespan, clock[i]);
  }
  return timing;
}

}  // namespace kpipe::schedule::detail
