#include <algorithm>
#include <map>

#include "catch.hpp"
#include "kpipe/schedule/validate.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

// SimulationResult::span_bubble counts idle time inside each rank's window,
// from its first compute action to its last: what the paper's parallelogram
// drives to zero. The rest of kpipe's bubble is the window's offset (rank r
// starts r forwards late), which only overlapping steps could hide.

TEST_CASE("zb-h2 and zb-v: valid, one F, B and W per microbatch and stage, W ascending", "[schedule][zero-bubble]") {
  for (const std::string name : {"zb-h2", "zb-v"}) {
    const int v = name == "zb-v" ? 2 : 1;
    for (const int p : {1, 2, 3, 4, 8}) {
      for (const int m : {1, 2, 3, p, 2 * p, 8, 16}) {
        CAPTURE(name, p, m);
        const Schedule s = lowered(name, p, m, v);
        REQUIRE(find_problem(s) == std::nullopt);
        for (int r = 0; r < p; ++r) {
          std::map<std::pair<int, int>, int> count[3];  // F, B, W per (microbatch, chunk)
          std::vector<int> last_weight(v, -1);
          for (const Action& a : compute_actions(s, r)) {
            REQUIRE(a.kind != ActionKind::backward);
            ++count[static_cast<int>(a.kind)][{a.microbatch, a.chunk}];
            if (a.kind == ActionKind::backward_weight) {
              CHECK(a.microbatch == last_weight[a.chunk] + 1);
              last_weight[a.chunk] = a.microbatch;
            }
          }
          for (const auto& per_kind : count) {
            CHECK(per_kind.size() == static_cast<std::size_t>(m * v));
            for (const auto& [key, n] : per_kind) CHECK(n == 1);
          }
        }
      }
    }
  }
}

// Tolerance: with F = B = W = 1 every simulated time is a small integer, so
// "zero" is exact; the margin only absorbs the division by the busy time.
TEST_CASE("zb-h2 at F = B = W, m >= 2p: no gap inside any rank's window, twice 1F1B's stash",
          "[schedule][zero-bubble]") {
  const CostModel costs = unit_forward_input_weight();
  for (const int p : {2, 4, 8}) {
    for (const int m : {2 * p, 8, 16, 32}) {
      if (m < 2 * p) continue;
      CAPTURE(p, m);
      const Schedule s = lowered("zb-h2", p, m);
      const SimulationResult zb = simulate(s, costs);
      const SimulationResult one_f_one_b = simulate(lowered("1f1b", p, m), costs);
      CHECK(zb.span_bubble().idle_over_useful == Approx(0.0).margin(1e-12));
      // What is left is the unavoidable start offset: rank p-1 waits p-1 forwards,
      // and every rank ends that much after its start. A third of 1F1B's (p-1)/m.
      CHECK(zb.bubble().idle_over_useful == Approx((p - 1) / (3.0 * m)));
      CHECK(zb.bubble().idle_over_useful == Approx(one_f_one_b.bubble().idle_over_useful / 3));
      CHECK(zb.bubble().idle_over_useful == Approx(theoretical_bubble(s, costs)->bubble.idle_over_useful));
      CHECK(zb.ranks[0].peak_stashed > one_f_one_b.ranks[0].peak_stashed);  // 1F1B: p - r
      CHECK(zb.ranks[0].peak_stashed <= 2 * p);
      for (int r = 0; r < p; ++r) CHECK(zb.ranks[r].peak_stashed <= 2 * (p - r) - 1);
    }
  }
}

TEST_CASE("zb-v at F = B = W, m >= 2p: no gap inside any window, 1F1B's peak activation memory",
          "[schedule][zero-bubble]") {
  const CostModel costs = unit_forward_input_weight();  // per model stage: half a pipeline stage
  for (const int p : {2, 4, 8}) {
    for (const int m : {2 * p, 8, 16, 32}) {
      if (m < 2 * p) continue;
      CAPTURE(p, m);
      const Schedule s = lowered("zb-v", p, m, 2);
      const SimulationResult zb = simulate(s, costs);
      CHECK(zb.span_bubble().idle_over_useful == Approx(0.0).margin(1e-12));
      // The start offset is p-1 forwards of half a stage: half of ZB-H1's and ZB-H2's bubble.
      CHECK(zb.bubble().idle_over_useful == Approx((p - 1) / (6.0 * m)));
      CHECK(zb.bubble().idle_over_useful == Approx(theoretical_bubble(s, costs)->bubble.idle_over_useful));
      // Stashed (microbatch, chunk) pairs, each half a stage's activations: at most p stages' worth, 1F1B's peak.
      for (int r = 0; r < p; ++r) CHECK(zb.ranks[r].peak_stashed <= 2 * p);
      CHECK(zb.ranks[0].peak_stashed == 2 * p);
    }
  }
}

TEST_CASE("zb-v's turn at rank p-1 is a hand-over, not a message", "[schedule][zero-bubble]") {
  const Schedule s = lowered("zb-v", 3, 4, 2);
  for (const Action& a : s.ranks[2]) {
    if (is_communication(a.kind)) CHECK(a.peer == 1);  // never to itself
  }
  // Both ends of the V are on rank 0: it computes the loss and talks to rank 1 only.
  CHECK(std::count_if(s.ranks[0].begin(), s.ranks[0].end(),
                      [](const Action& a) { return a.kind == ActionKind::loss; }) == 4);
  for (const Action& a : s.ranks[0]) {
    if (is_communication(a.kind)) CHECK(a.peer == 1);
  }
}

namespace {
// Each chunk's F's, B's and W's in ascending microbatch order, which keeps runs bitwise.
void check_each_chunk_in_order(const Schedule& s) {
  for (int r = 0; r < s.p; ++r) {
    std::map<std::pair<int, int>, int> next;  // (kind, chunk) -> the microbatch expected next
    for (const Action& a : compute_actions(s, r)) CHECK(a.microbatch == next[{static_cast<int>(a.kind), a.chunk}]++);
  }
}
}  // namespace

// Qi et al., "Zero Bubble Pipeline Parallelism" (arXiv 2401.10241), Table 8:
// the 6.2B model on p = 16, m = 128 with profiled per-chunk costs F = 14.316,
// B = 14.306, W = 9.639 and 1.619 per transfer; the authors' ZB-V leaves its
// worst rank idle for 0.027 of its span (their figure of merit, from the
// rank's first compute to its last). kpipe's list planner left 0.08 there.
TEST_CASE("zb-v at the zero-bubble paper's 6.2B costs: the worst rank's span bubble is the paper's 0.027",
          "[schedule][zero-bubble]") {
  const int p = 16, m = 128;
  const PlanningCosts costs{14.316, 14.306, 9.639, 1.619};
  const Schedule s = lowered("zb-v", p, m, 2, costs);
  REQUIRE(find_problem(s) == std::nullopt);
  const SimulationResult result = simulate(s, simulated_costs(costs));
  double worst = 0.0;
  for (const RankStats& rank : result.ranks) {
    worst = std::max(worst, (rank.span - rank.busy) / rank.span);
    CHECK(rank.peak_stashed <= 2 * p);  // 1F1B's peak, as at unit costs
  }
  CHECK(worst <= 0.0275);
  check_each_chunk_in_order(s);
}

namespace {
// The largest share of its span any rank idles: the Zero Bubble paper's bubble rate.
double worst_span_bubble(const Schedule& s, const PlanningCosts& costs) {
  double worst = 0.0;
  for (const RankStats& rank : simulate(s, simulated_costs(costs)).ranks) {
    worst = std::max(worst, (rank.span - rank.busy) / rank.span);
  }
  return worst;
}
}  // namespace

// The other rows of Table 8 (the version in the authors' repository, paper.pdf).
// 6.2B: the same profiled costs at m = 48 and 64 (0.0697, 0.0533). 14.6B (p =
// 24) and 28.3B (p = 32): the table gives no costs; these per-chunk costs (F =
// B, W and latency relative to them) are the ones under which kpipe's 1F1B,
// ZB-H1 and ZB-H2 reproduce the table's columns for those schedules within
// 0.0005 at all three m (a least-squares fit, which at 6.2B gives back the
// profiled costs above). kpipe's ZB-V is then never more than 0.003 above the
// authors' figure (0.002-0.004 below it at 14.6B and 28.3B) and below ZB-H1.
TEST_CASE("zb-v at the other Table 8 settings: at most the authors' bubble + 0.003, below zb-h1",
          "[schedule][zero-bubble]") {
  struct Row {
    int p, m;
    PlanningCosts costs;
    double authors;
  };
  const PlanningCosts b62{14.316, 14.306, 9.639, 1.619}, b146{0.5, 0.5, 0.38245, 0.0553},
      b283{0.5, 0.5, 0.3796, 0.0462};
  for (const Row& row : {Row{16, 48, b62, 0.0697}, Row{16, 64, b62, 0.0533}, Row{24, 72, b146, 0.0638},
                         Row{24, 96, b146, 0.0483}, Row{24, 192, b146, 0.0250}, Row{32, 96, b283, 0.0593},
                         Row{32, 128, b283, 0.0451}, Row{32, 256, b283, 0.0236}}) {
    CAPTURE(row.p, row.m);
    const double zb_v = worst_span_bubble(lowered("zb-v", row.p, row.m, 2, row.costs), row.costs);
    // ZB-H1 on whole stages: a stage is the V's two chunks.
    const PlanningCosts stage{2 * row.costs.forward, 2 * row.costs.backward_input, 2 * row.costs.backward_weight,
                              row.costs.latency};
    CHECK(zb_v <= row.authors + 0.003);
    if (row.p == 16) CHECK(zb_v == Approx(row.authors).margin(0.003));  // the profiled costs
    CHECK(zb_v < worst_span_bubble(lowered("zb-h1", row.p, row.m, 1, stage), stage));
  }
}

TEST_CASE("zb-v at uneven costs and latencies: valid, 1F1B's peak stash, each chunk in microbatch order",
          "[schedule][zero-bubble]") {
  for (const PlanningCosts& costs : {PlanningCosts{1.0, 1.0, 0.25, 0.0}, PlanningCosts{1.0, 2.0, 3.0, 0.5},
                                     PlanningCosts{3.0, 1.0, 1.0, 2.0}, PlanningCosts{1.0, 1.0, 1.0, 10.0}}) {
    for (const int p : {1, 2, 3, 5, 8}) {
      for (const int m : {1, 2, p, 2 * p, 3 * p + 1}) {
        CAPTURE(costs.forward, costs.backward_input, costs.backward_weight, costs.latency, p, m);
        const Schedule s = lowered("zb-v", p, m, 2, costs);
        REQUIRE(find_problem(s) == std::nullopt);
        const SimulationResult result = simulate(s, unit_forward_input_weight());
        for (const RankStats& rank : result.ranks) CHECK(rank.peak_stashed <= 2 * p);
        check_each_chunk_in_order(s);
      }
    }
  }
}

// Issue 24's bar: ZB-V is never worse than ZB-H1 at the same memory (1F1B's
// peak), compared at equal model size: a ZB-V chunk costs half a ZB-H1 stage.
TEST_CASE("zb-v leaves no more idle time than zb-h1 at the same costs", "[schedule][zero-bubble]") {
  for (const PlanningCosts& chunk : {PlanningCosts{1.0, 1.0, 1.0, 0.0}, PlanningCosts{1.0, 1.0, 1.0, 0.2},
                                     PlanningCosts{1.0, 1.2, 0.6, 0.1}, PlanningCosts{14.316, 14.306, 9.639, 1.619}}) {
    for (const int p : {2, 4, 8}) {
      for (const int m : {p, 2 * p, 4 * p}) {
        CAPTURE(chunk.forward, chunk.backward_input, chunk.backward_weight, chunk.latency, p, m);
        const CostModel v_costs = simulated_costs(chunk);
        CostModel h1_costs = v_costs;
        h1_costs.forward *= 2;
        h1_costs.backward_input *= 2;
        h1_costs.backward_weight *= 2;
        const SimulationResult zb_v = simulate(lowered("zb-v", p, m, 2, chunk), v_costs);
        const SimulationResult zb_h1 = simulate(lowered("zb-h1", p, m), h1_costs);
        CHECK(zb_v.makespan <= zb_h1.makespan);
        CHECK(zb_v.span_bubble().idle_over_total <= zb_h1.span_bubble().idle_over_total);
      }
    }
  }
}
