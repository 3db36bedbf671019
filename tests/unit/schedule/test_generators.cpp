#include <algorithm>

#include "catch.hpp"
#include "kpipe/schedule/validate.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

// Forwards a rank runs before its first backward. Megatron runs `warmup`
// forwards, then starts its steady phase with one more forward before the
// first backward, unless every forward is warm-up.
int forwards_before_first_backward(const std::vector<Action>& actions) {
  int count = 0;
  for (const Action& a : actions) {
    if (a.kind != ActionKind::forward) break;
    ++count;
  }
  return count;
}
int expected_forwards_before_first_backward(int warmup, int total) { return warmup < total ? warmup + 1 : total; }

}  // namespace

TEST_CASE("1F1B warms up with Megatron's min(p-r-1, m) forwards", "[schedule][generate]") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 64; ++m) {
      const Schedule s = generate({"1f1b", p, 1, m});
      for (int r = 0; r < p; ++r) {
        CAPTURE(p, m, r);
        CHECK(forwards_before_first_backward(s.ranks[r]) ==
              expected_forwards_before_first_backward(std::min(p - r - 1, m), m));
      }
    }
  }
}

TEST_CASE("1F1B's and ZB-H1's extra warm-up runs more forwards on every rank but the last, at their step",
          "[schedule][generate]") {
  const CostModel unit = unit_forward_input_weight();
  for (const std::string name : {"1f1b", "zb-h1"}) {
    for (int p = 2; p <= 6; ++p) {
      for (const int m : {1, p - 1, p, 2 * p + 1, 16}) {
        for (int extra = 1; extra <= 3; ++extra) {
          ScheduleSpec spec{name, p, 1, m};
          spec.extra_warmup = extra;
          Schedule s = generate(spec);
          lower(s);
          REQUIRE_NOTHROW(validate(s));
          const SimulationResult deeper = simulate(s, unit);
          const SimulationResult plain = simulate(lowered(name, p, m), unit);
          for (int r = 0; r < p; ++r) {
            CAPTURE(name, p, m, extra, r);
            const int warmup = std::min(p - r - 1 + (r + 1 < p ? extra : 0), m);
            CHECK(forwards_before_first_backward(compute_actions(s, r)) ==
                  expected_forwards_before_first_backward(warmup, m));
            CHECK(deeper.ranks[r].peak_stashed == std::min(warmup + 1, m));
          }
          // Equal stages: the extra forwards only fill a wait the first
          // backward had anyway, so the step stays the schedule's own; but
          // ZB-H1 at m <= p, whose B's chain with no gap, loses a unit or two
          // to a second or third extra forward on a middle rank.
          CAPTURE(name, p, m, extra);
          if (name == "1f1b" || extra == 1 || m > p) {
            CHECK(deeper.makespan == plain.makespan);
          } else {
            CHECK(deeper.makespan >= plain.makespan);
            CHECK(deeper.makespan <= plain.makespan + extra - 1);
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved warms up with Megatron's min(2(p-r-1) + (v-1)p, m v) forwards", "[schedule][generate]") {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 64; m += p) {
        const Schedule s = generate({"interleaved", p, v, m});
        for (int r = 0; r < p; ++r) {
          CAPTURE(p, v, m, r);
          const int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, m * v);
          CHECK(forwards_before_first_backward(s.ranks[r]) == expected_forwards_before_first_backward(warmup, m * v));
        }
      }
    }
  }
}

TEST_CASE("interleaved follows Megatron's virtual-microbatch table", "[schedule][generate]") {
  // Megatron's example (schedules.py): PP2, VP2, 5 microbatches in groups of 3:
  // microbatch 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1. kpipe picks
  // g = 3 for m = 5, p = 2 (5 % 2 = 1 < p would stall).
  REQUIRE(interleaved_group_size(5, 2) == 3);
  const Schedule s = generate({"interleaved", 2, 2, 5});
  std::vector<std::pair<int, int>> forwards;
  for (const Action& a : s.ranks[1]) {
    if (a.kind == ActionKind::forward) forwards.emplace_back(a.microbatch, a.chunk);
  }
  const std::vector<std::pair<int, int>> megatron = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                                     {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  CHECK(forwards == megatron);
}

TEST_CASE("the interleaved group size leaves no short last group", "[schedule][generate]") {
  CHECK(interleaved_group_size(8, 4) == 4);
  CHECK(interleaved_group_size(4, 4) == 4);
  CHECK(interleaved_group_size(5, 4) == 5);
  CHECK(interleaved_group_size(9, 4) == 5);  // groups of 5 and 4
  for (int p = 1; p <= 16; ++p) {
    for (int m = p; m <= 64; ++m) {
      const int g = interleaved_group_size(m, p);
      CAPTURE(p, m, g);
      CHECK(g >= p);
      CHECK((m % g == 0 || m % g >= p));
    }
  }
}

TEST_CASE("GPipe runs every forward, then every backward in ascending order", "[schedule][generate]") {
  const Schedule s = generate({"gpipe", 3, 1, 4});
  for (const auto& actions : s.ranks) {
    REQUIRE(actions.size() == 8);
    for (int j = 0; j < 4; ++j) {
      CHECK(actions[j] == compute_action(ActionKind::forward, j, 0));
      CHECK(actions[4 + j] == compute_action(ActionKind::backward, j, 0));
    }
  }
}

TEST_CASE("ZB-H1 splits every backward into B and W, W in ascending order", "[schedule][generate]") {
  const Schedule s = generate({"zb-h1", 4, 1, 8});
  for (int r = 0; r < 4; ++r) {
    std::vector<int> weights;
    int inputs = 0;
    for (const Action& a : s.ranks[r]) {
      CHECK(a.kind != ActionKind::backward);
      if (a.kind == ActionKind::backward_weight) weights.push_back(a.microbatch);
      if (a.kind == ActionKind::backward_input) ++inputs;
    }
    CHECK(inputs == 8);
    CHECK(weights == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  }
}

TEST_CASE("the forward schedule only forwards", "[schedule][generate]") {
  const Schedule s = lowered("forward", 3, 5);
  CHECK_FALSE(s.training());
  for (const auto& actions : s.ranks) {
    CHECK(std::none_of(actions.begin(), actions.end(), [](const Action& a) {
      return a.kind == ActionKind::loss || is_step_level(a.kind) || a.kind == ActionKind::backward;
    }));
  }
}

TEST_CASE("unschedulable specs are input errors that say what works", "[schedule][generate]") {
  CHECK(error_of([] {
          generate({"1f1c", 2, 1, 4});
        }) ==
        "unknown schedule '1f1c' (did you mean '1f1b'?); choose gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, "
        "v-half, v-min, dualpipe-v or forward");
  CHECK(error_of([] {
          generate({"1f1b", 2, 2, 4});
        }) ==
        "pipeline.virtual_stages = 2 needs pipeline.schedule = \"interleaved\" (or \"zb-v\" for 2 chunks), but "
        "the schedule is \"1f1b\"; set pipeline.virtual_stages = 1 or use the interleaved schedule");
  CHECK(error_of([] {
          generate({"interleaved", 4, 2, 3});
        }) ==
        "the interleaved schedule needs m >= p, but m = 3 microbatches < p = 4 stages; raise "
        "train.global_batch to at least 4 or lower train.microbatch_size");
  CHECK(error_of([] {
          generate({"interleaved", 4, 1, 8});
        }).find("needs pipeline.virtual_stages >= 2") != std::string::npos);
  CHECK(error_of([] { generate({"1f1b", 0, 1, 4}); }).find("p, v and m >= 1") != std::string::npos);
  CHECK(error_of([] {
          generate({"interleaved", 4096, 64, 1 << 20});
        }).find("kpipe plans at most 250 million") != std::string::npos);
}

TEST_CASE("lowering inserts messages with tags unique per (microbatch, chunk, direction)", "[schedule][lower]") {
  const Schedule s = lowered("interleaved", 3, 6, 2);
  for (int r = 0; r < 3; ++r) {
    std::vector<std::pair<int, int>> seen;  // (peer, tag) of sends
    for (const Action& a : s.ranks[r]) {
      if (!is_send(a.kind)) continue;
      const int direction = a.kind == ActionKind::send_act ? 0 : 1;
      CHECK(a.tag == 2 * (a.microbatch * 2 + a.chunk) + direction);
      seen.emplace_back(a.peer, a.tag);
    }
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  }
  // Rank 2's chunk 0 (stage 2) feeds rank 0's chunk 1 (stage 3).
  const auto& last = s.ranks[2];
  CHECK(std::find(last.begin(), last.end(), message_action(ActionKind::send_act, 0, 0, 0, 0)) != last.end());
  const auto& first = s.ranks[0];
  CHECK(std::find(first.begin(), first.end(), message_action(ActionKind::recv_act, 0, 1, 2, 0)) != first.end());
}

TEST_CASE("lowering keeps single-rank pipelines free of messages", "[schedule][lower]") {
  const Schedule s = lowered("interleaved", 1, 3, 2);
  CHECK(std::none_of(s.ranks[0].begin(), s.ranks[0].end(), [](const Action& a) { return is_communication(a.kind); }));
  CHECK(s.ranks[0].back() == step_action(ActionKind::optimizer_step));
  Schedule again = s;
  CHECK(error_of([&] { lower(again); }).find("already lowered") != std::string::npos);
}
