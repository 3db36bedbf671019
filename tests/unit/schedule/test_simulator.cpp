#include <algorithm>
#include <stdexcept>
#include <string>

#include "catch.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

// With unit costs every simulated time is an integer or half-integer, so the
// bubble fractions are compared exactly by cross-multiplying.

TEST_CASE("GPipe and 1F1B: makespan (m+p-1)(tF+tB) and bubble (p-1)/(m+p-1), exactly", "[schedule][simulate]") {
  const CostModel costs = unit_forward_and_backward();
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 64; ++m) {
        const SimulationResult r = simulate(lowered(name, p, m), costs);
        CAPTURE(name, p, m);
        CHECK(r.makespan == (m + p - 1) * 2.0);
        // idle/total = Σ idle / (p · makespan) = (p-1)/(m+p-1)
        CHECK(r.total_idle * (m + p - 1) == (p - 1) * (p * r.makespan));
        // idle/useful = (p-1)/m
        CHECK(r.total_idle * m == (p - 1) * r.total_busy);
      }
    }
  }
}

TEST_CASE("span bubble: 1F1B's is (p-1)/(2m), half its makespan bubble, exactly", "[schedule][simulate]") {
  // Rank r starts r forwards late and ends r backwards early: Σ_r r(tF + tB) idle outside the spans.
  CostModel costs = unit_forward_and_backward();
  costs.backward_input = 1.5;  // tF = 1, tB = 2: any ratio gives the same fraction
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const SimulationResult r = simulate(lowered("1f1b", p, m), costs);
      CAPTURE(p, m);
      const Bubble span = r.span_bubble();
      CHECK(span.idle_over_useful * (2 * m) == Approx(p - 1).margin(1e-12));
      CHECK(span.idle_over_useful * 2 == Approx(r.bubble().idle_over_useful).margin(1e-12));
    }
  }
}

TEST_CASE("span: each rank's first compute start to its last compute end, for every schedule", "[schedule][simulate]") {
  const CostModel costs = unit_forward_input_weight();
  for (const char* name : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v"}) {
    const int v = std::string(name) == "interleaved" || std::string(name) == "zb-v" ? 2 : 1;
    const Schedule s = lowered(name, 4, 8, v);
    const SimulationResult r = simulate(s, costs);
    CAPTURE(name);
    double idle_in_spans = 0.0;
    for (int rank = 0; rank < s.p; ++rank) {
      double first = -1.0, last = 0.0;
      for (std::size_t i = 0; i < s.ranks[rank].size(); ++i) {
        if (!is_compute(s.ranks[rank][i].kind)) continue;
        if (first < 0.0) first = r.start(rank, i);
        last = r.end[rank][i];
      }
      CHECK(r.ranks[rank].span == last - first);
      CHECK(r.ranks[rank].span <= r.makespan);
      idle_in_spans += last - first - r.ranks[rank].busy;
    }
    CHECK(r.span_bubble().idle_over_useful == Approx(idle_in_spans / r.total_busy).margin(1e-12));
    CHECK(r.span_bubble().idle_over_useful <= r.bubble().idle_over_useful);
  }
}

TEST_CASE("interleaved: bubble (p-1)/(v m) for m a multiple of p", "[schedule][simulate]") {
  const CostModel costs = unit_forward_and_backward();
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 64; m += p) {
        const SimulationResult r = simulate(lowered("interleaved", p, m, v), costs);
        CAPTURE(p, v, m);
        CHECK(r.total_idle * (v * m) == (p - 1) * r.total_busy);
      }
    }
  }
}

TEST_CASE("interleaved: strictly smaller bubble than 1F1B for every m >= p", "[schedule][simulate]") {
  const CostModel costs = unit_forward_and_backward();
  for (int p = 2; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 64; ++m) {
        const SimulationResult r = simulate(lowered("interleaved", p, m, v), costs);
        CAPTURE(p, v, m);
        // idle/useful < (p-1)/m, 1F1B's exact value (test above)
        CHECK(r.total_idle * m < (p - 1) * r.total_busy);
      }
    }
  }
}

TEST_CASE("peak stashed activations: GPipe m, 1F1B min(p-r, m), ZB-H1 no more than 1F1B", "[schedule][simulate]") {
  const CostModel costs = unit_forward_input_weight();
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const SimulationResult gpipe = simulate(lowered("gpipe", p, m), costs);
      const SimulationResult one_f_one_b = simulate(lowered("1f1b", p, m), costs);
      const SimulationResult zb = simulate(lowered("zb-h1", p, m), costs);
      for (int r = 0; r < p; ++r) {
        CAPTURE(p, m, r);
        CHECK(gpipe.ranks[r].peak_stashed == m);
        CHECK(one_f_one_b.ranks[r].peak_stashed == std::min(p - r, m));
        CHECK(zb.ranks[r].peak_stashed <= one_f_one_b.ranks[r].peak_stashed);
      }
    }
  }
}

TEST_CASE("ZB-H1 with F = B = W: bubble (p-1)(tF+tB-tW), a third of 1F1B's, for m >= p", "[schedule][simulate]") {
  const CostModel costs = unit_forward_input_weight();
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 64; ++m) {
      const Schedule schedule = lowered("zb-h1", p, m);
      const SimulationResult zb = simulate(schedule, costs);
      const SimulationResult one_f_one_b = simulate(lowered("1f1b", p, m), costs);
      CAPTURE(p, m);
      CHECK(2 * zb.total_idle <= one_f_one_b.total_idle);  // the bound: at most half
      CHECK(zb.total_idle == p * (p - 1) * 1.0);           // each rank idles (p-1)(1 + 1 - 1)
      CHECK(zb.bubble().idle_over_useful == Approx(theoretical_bubble(schedule, costs)->bubble.idle_over_useful));
    }
  }
}

TEST_CASE("the forward schedule: makespan (m+p-1) tF", "[schedule][simulate]") {
  CostModel costs;
  costs.forward = 2.0;
  const SimulationResult r = simulate(lowered("forward", 4, 6), costs);
  CHECK(r.makespan == (6 + 4 - 1) * 2.0);
  CHECK(r.total_busy == 4 * 6 * 2.0);
  CHECK(r.ranks[0].peak_stashed == 6);  // nothing frees a stash without a backward pass
}

TEST_CASE("transfers cost latency + bytes / bandwidth on the link, not on the rank", "[schedule][simulate]") {
  CostModel costs;
  costs.forward = 1.0;
  costs.backward_input = 1.0;
  costs.backward_weight = 1.0;
  costs.comm_latency = 0.5;
  costs.comm_bandwidth = 50.0;
  costs.bytes_per_transfer = 100;  // 0.5 + 100/50 = 2.5 per transfer
  const Schedule s = lowered("1f1b", 2, 1);
  const SimulationResult r = simulate(s, costs);
  // rank 0: F [0,1]; rank 1: F [3.5,4.5], BW [4.5,6.5]; rank 0: BW [9,11]
  CHECK(r.makespan == 11.0);
  CHECK(r.ranks[0].busy == 3.0);
  CHECK(r.ranks[0].idle == 8.0);
  CHECK(r.ranks[1].idle == 8.0);
  CHECK(r.transfers == 2);
  CHECK(r.bytes_moved == 200);
  // The receive on rank 1 ends when the activation arrives.
  REQUIRE(s.ranks[1][0].kind == ActionKind::recv_act);
  CHECK(r.start(1, 0) == 0.0);
  CHECK(r.end[1][0] == 3.5);
  CHECK(r.end[1][1] == 4.5);
}

TEST_CASE("per-stage communication: boundary shares, their all-gather, and the tensor group's sums",
          "[schedule][simulate]") {
  CostModel costs;
  costs.comm_latency = 0.5;
  costs.comm_bandwidth = 100.0;
  costs.bytes_per_transfer = 1000;  // replaced by the per-stage bytes
  // Stage 0: a 100-byte share of its output (gathered), two sums of 50 bytes in all per F, none in B;
  // stage 1: one sum of 100 bytes per F, one of 200 per B.
  costs.communication = {{100, true, 50, 2, 0, 0}, {0, true, 100, 1, 200, 1}};
  const SimulationResult r = simulate(lowered("1f1b", 2, 1), costs);
  // rank 0: F 1 + 2 x 0.5 + 0.5 = 2.5; the activation: (0.5 + 1) on the link and (0.5 + 1) for the
  // all-gather, arriving at 5.5; rank 1: F 1 + 0.5 + 1 [5.5, 8], BW 2 + 0.5 + 2 [8, 12.5]; the gradient
  // arrives at 15.5; rank 0: BW 2 [15.5, 17.5].
  CHECK(r.makespan == 17.5);
  CHECK(r.ranks[0].busy == 4.5);
  CHECK(r.ranks[1].busy == 7.0);
  CHECK(r.ranks[0].bytes_sent == 100);
  CHECK(r.ranks[1].bytes_sent == 100);
  CHECK(r.bytes_moved == 200);
}

TEST_CASE("per-stage communication must cover every model stage", "[schedule][simulate]") {
  CostModel costs = unit_forward_and_backward();
  costs.communication = {{100, false, 0, 0, 0, 0}};
  CHECK_THROWS_WITH(simulate(lowered("1f1b", 2, 1), costs),
                    Catch::Contains("communication for 1 model stages, but p·v = 2"));
}

TEST_CASE("per-stage costs replace the uniform ones", "[schedule][simulate]") {
  CostModel costs = unit_forward_and_backward();
  costs.stages = {{1.0, 0.5, 0.5}, {3.0, 1.5, 1.5}};
  const SimulationResult r = simulate(lowered("gpipe", 2, 1), costs);
  // rank 0 F [0,1]; rank 1 F [1,4], BW [4,7]; rank 0 BW [7,8]
  CHECK(r.makespan == 8.0);
  CHECK(r.ranks[1].busy == 6.0);
  costs.stages = {{1.0, 0.5, 0.5}};
  CHECK(error_of([&] { simulate(lowered("gpipe", 2, 1), costs); }) ==
        "the cost model has costs for 1 model stages, but p·v = 2 model stages need one each");
  costs.stages = {{1.0, 0.5, 0.5}, {1.0, 0.0, 0.5}};
  CHECK(error_of([&] { simulate(lowered("gpipe", 2, 1), costs); }) ==
        "simulated costs of model stage 1 must be > 0, but F = 1, B = 0, W = 0.5");
}

TEST_CASE("an in-flight limit the schedule exceeds is an input error naming the rank", "[schedule][simulate]") {
  CostModel costs = unit_forward_and_backward();
  costs.max_in_flight = 2;
  CHECK_NOTHROW(simulate(lowered("1f1b", 2, 8), costs));
  CHECK(error_of([&] { simulate(lowered("gpipe", 2, 8), costs); }) ==
        "rank 0, action 4 (F mb=2 chunk=0) would hold 3 stashed microbatches, more than the limit of 2 "
        "(sim.max_in_flight); raise the limit or use a schedule with fewer microbatches in flight (1f1b holds at "
        "most p - r)");
}

TEST_CASE("a schedule that skipped validation cannot send past the last stage", "[schedule][simulate]") {
  Schedule s = lowered("1f1b", 2, 1);
  REQUIRE(s.ranks[1][1] == compute_action(ActionKind::forward, 0, 0));
  s.ranks[1].insert(s.ranks[1].begin() + 2, message_action(ActionKind::send_act, 0, 0, 0, 0));
  CHECK(error_of([&] { simulate(s, unit_forward_and_backward()); }) ==
        "invalid 1f1b schedule: rank 1, action 2 (SEND_ACT mb=0 chunk=0 peer=0 tag=0): model stage 1 has no next "
        "stage to send to");
}

TEST_CASE("zero or negative costs are input errors", "[schedule][simulate]") {
  CostModel costs;
  costs.backward_weight = 0.0;
  CHECK(error_of([&] { simulate(lowered("1f1b", 2, 2), costs); }) ==
        "simulated costs must be > 0, but F = 1, B = 1, W = 0");
  costs.backward_weight = 1.0;
  costs.comm_latency = -1.0;
  CHECK(error_of([&] { simulate(lowered("1f1b", 2, 2), costs); }).find("communication costs must be >= 0") == 0);
}

TEST_CASE("theoretical bubbles follow DESIGN.md's formulas", "[schedule][simulate]") {
  const CostModel costs = unit_forward_input_weight();
  const auto one_f_one_b = theoretical_bubble(generate({"1f1b", 4, 1, 12}), costs);
  REQUIRE(one_f_one_b);
  CHECK(one_f_one_b->formula == "(p-1)/m");
  CHECK(one_f_one_b->bubble.idle_over_useful == Approx(3.0 / 12));
  CHECK(one_f_one_b->bubble.idle_over_total == Approx(3.0 / 15));
  const auto interleaved = theoretical_bubble(generate({"interleaved", 4, 2, 12}), costs);
  REQUIRE(interleaved);
  CHECK(interleaved->bubble.idle_over_useful == Approx(3.0 / 24));
  CHECK(interleaved->bubble.idle_over_total == Approx(3.0 / 27));
  // A hand-written schedule (a schedule file's name, no registry entry) has no formula.
  Schedule custom = generate({"1f1b", 4, 1, 12});
  custom.name = "custom";
  custom.entry = nullptr;
  CHECK_FALSE(theoretical_bubble(custom, costs));
}

namespace {

// The steps as one long schedule: each step's microbatches numbered on from
// the last step's, and their message tags with them, so no message slot is
// shared between steps.
Schedule copied_back_to_back(const Schedule& schedule, int steps) {
  Schedule repeated = schedule;
  repeated.m = schedule.m * steps;
  const int tag_shift = 2 * schedule.v * schedule.m;  // tag = 2·(microbatch·v + chunk) + direction
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

TEST_CASE("steps back to back: every action's time as in one schedule of all steps' microbatches",
          "[schedule][simulate]") {
  CostModel costs = unit_forward_input_weight();
  costs.comm_latency = 0.25;
  costs.overlap = 0.5;
  costs.optimizer_step = 2.0;
  costs.variation = Variation{{0.5, 1.0, 1.5}, {0.0, 2.0}, {1.0, 3.0}, 7};
  for (const auto& [name, v] : kpipe::schedule::testing::training_schedules) {
    for (const int p : {2, 4}) {
      CAPTURE(name, p);
      const Schedule s = lowered(name, p, 2 * p, v);
      const int steps = 3;
      const SimulationResult repeated = simulate(s, costs, Record::every_action, steps);
      const SimulationResult copied = simulate(copied_back_to_back(s, steps), costs);
      CHECK(repeated.end == copied.end);
      CHECK(repeated.makespan == copied.makespan);
      CHECK(repeated.total_busy == copied.total_busy);
      for (int r = 0; r < p; ++r) {
        const std::size_t n = s.ranks[r].size();
        REQUIRE(repeated.step_end[r].size() == static_cast<std::size_t>(steps));
        for (int k = 0; k < steps; ++k) CHECK(repeated.step_end[r][k] == copied.end[r][(k + 1) * n - 1]);
      }
    }
  }
}

TEST_CASE("only training steps run back to back", "[schedule][simulate]") {
  const Schedule forward_only = lowered("forward", 2, 4);
  CHECK_THROWS_AS(simulate(forward_only, unit_forward_and_backward(), Record::summary, 2), std::invalid_argument);
  CHECK_THROWS_AS(simulate(lowered("1f1b", 2, 4), unit_forward_and_backward(), Record::summary, 0),
                  std::invalid_argument);
}
