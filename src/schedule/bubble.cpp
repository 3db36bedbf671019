#include <fmt/format.h>

#include <algorithm>

#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

namespace {

Bubble from_ratio(double idle_over_useful) { return {idle_over_useful, idle_over_useful / (1.0 + idle_over_useful)}; }

}  // namespace

Bubble SimulationResult::bubble() const {
  if (total_busy <= 0.0 || makespan <= 0.0) return {};
  return {total_idle / total_busy, total_idle / (total_busy + total_idle)};
}

// DESIGN.md §1, for equal costs on every stage: each rank idles p-1 forward
// and backward slots while the pipeline fills and drains, against m (v·m
// with interleaving) slots of work. ZB-H1 fills the drain with W's, leaving
// (p-1)(tF + tB - tW) idle per rank (Qi et al.; for m >= p).
std::optional<TheoreticalBubble> theoretical_bubble(const Schedule& schedule, const CostModel& costs) {
  const double p = schedule.p;
  const double m = schedule.m;
  const double v = schedule.v;
  const std::string& name = schedule.name;
  if (name == "gpipe" || name == "1f1b" || name == "forward") {
    return TheoreticalBubble{from_ratio((p - 1) / m), "(p-1)/m"};
  }
  if (name == "interleaved") return TheoreticalBubble{from_ratio((p - 1) / (v * m)), "(p-1)/(v*m)"};
  if (name == "zb-h1") {
    const double f = costs.forward, b = costs.backward_input, w = costs.backward_weight;
    return TheoreticalBubble{from_ratio((p - 1) * std::max(f + b - w, 0.0) / (m * (f + b + w))),
                             "(p-1)(tF+tB-tW)/(m(tF+tB+tW))"};
  }
  return std::nullopt;
}

}  // namespace kpipe::schedule
