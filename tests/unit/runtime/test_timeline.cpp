// The measured bubble's halves (bubble_terms, combine_bubble_terms) on a
// simulated step: without a barrier a rank's period holds its optimizer step,
// which is its own work and not idle, so steps that follow each other at the
// makespan plus the update have the makespan's bubble.
#include "kpipe/runtime/measurement/timeline.hpp"

#include <vector>

#include "../schedule/schedule_test_support.hpp"
#include "catch.hpp"
#include "kpipe/schedule/timeline.hpp"

using namespace kpipe;
using schedule::testing::lowered;

namespace {

// Rank r's measured timings, as the executor records them, from a simulated timeline.
std::vector<runtime::ActionTiming> timings_of(const schedule::Timeline& timeline, int rank) {
  std::vector<runtime::ActionTiming> timings;
  for (const auto& t : timeline.ranks[rank]) {
    timings.push_back({static_cast<std::int32_t>(timings.size()), t.start, t.end});
  }
  return timings;
}

}  // namespace

TEST_CASE("the bubble of steps without a barrier leaves each rank's optimizer step out of its period",
          "[runtime][timeline]") {
  // At F = B = W the bubbles of 1F1B, (p-1)/m, and ZB-H1, (p-1)/(3m).
  const int p = 4, m = 8;
  for (const auto& [name, bubble] : {std::pair{"1f1b", (p - 1.0) / m}, {"zb-h1", (p - 1.0) / (3 * m)}}) {
    INFO(name);
    const schedule::Schedule s = lowered(name, p, m);
    schedule::CostModel costs = schedule::testing::unit_forward_input_weight();
    costs.optimizer_step = 2.5;
    const schedule::SimulationResult result = simulate(s, costs);
    const schedule::Timeline timeline = schedule::simulated_timeline(s, result);
    const double period = result.last_compute_end + costs.optimizer_step;
    std::vector<double> terms;
    for (int r = 0; r < p; ++r) {
      const auto mine = runtime::bubble_terms(s, r, timings_of(timeline, r), period);
      CHECK(mine[3] == Approx(result.last_compute_end).epsilon(1e-12));
      terms.insert(terms.end(), mine.begin(), mine.end());
    }
    const runtime::MeasuredBubble after_barrier = runtime::combine_bubble_terms(p, terms, true);
    const runtime::MeasuredBubble back_to_back = runtime::combine_bubble_terms(p, terms, false);
    CHECK(after_barrier.bubble.idle_over_useful == Approx(bubble).epsilon(1e-12));
    CHECK(back_to_back.bubble.idle_over_useful == Approx(after_barrier.bubble.idle_over_useful).epsilon(1e-12));
    CHECK(back_to_back.bubble.idle_over_total == Approx(after_barrier.bubble.idle_over_total).epsilon(1e-12));
  }
}
