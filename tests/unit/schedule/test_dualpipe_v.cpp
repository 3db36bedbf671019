// DualPipeV against DeepSeek's own accounting (DeepSeek-V3 report §3.2.1 and
// the deepseek-ai/DualPipe README): PP = 2p model stages, each rank idles
// (PP/2-1)(F&B + B - 3W) per step with B the full backward, and holds PP+1
// stashed microbatch-chunks at its peak.
#include <algorithm>
#include <map>
#include <sstream>

#include "catch.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/text_form.hpp"
#include "kpipe/schedule/validate.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

Schedule dualpipe_v(int p, int m) { return lowered("dualpipe-v", p, m, 2); }

// F = B = W = 1 per model stage: BW = 2, and an F&B whose halves run one after the other is 3.
CostModel unit_costs(double overlap) {
  CostModel costs = unit_forward_input_weight();
  costs.overlap = overlap;
  return costs;
}

}  // namespace

TEST_CASE("dualpipe-v: valid for any p and m >= 2p, one F and one backward per microbatch and chunk, in order",
          "[schedule][dualpipe-v]") {
  for (const int p : {1, 2, 3, 4, 5, 8}) {
    for (const int m : {2 * p, 2 * p + 1, 3 * p, 4 * p + 2}) {
      CAPTURE(p, m);
      const Schedule s = dualpipe_v(p, m);
      REQUIRE(find_problem(s) == std::nullopt);
      int overlapped = 0;
      for (int r = 0; r < p; ++r) {
        std::map<std::pair<int, int>, int> forwards, backwards;  // per (microbatch, chunk)
        std::vector<int> last_forward(2, -1), last_backward(2, -1);
        for (const Action& a : compute_actions(s, r)) {
          overlapped += a.kind == ActionKind::forward_backward;
          for_each_part(a, [&](const Action& part) {
            if (part.kind == ActionKind::forward) {
              CHECK(part.microbatch == ++last_forward[part.chunk]);
              ++forwards[{part.microbatch, part.chunk}];
            } else if (releases_stash(part.kind)) {
              CHECK(part.microbatch == ++last_backward[part.chunk]);
              ++backwards[{part.microbatch, part.chunk}];
            }
          });
        }
        CHECK(forwards.size() == static_cast<std::size_t>(2 * m));
        CHECK(backwards.size() == static_cast<std::size_t>(2 * m));
        for (const auto& count : {forwards, backwards}) {
          for (const auto& [key, n] : count) CHECK(n == 1);
        }
      }
      // DeepSeek's phases: rank r overlaps 2(m-2p+r+1) pairs in its steady
      // state (the last rank one fewer) and p-1-r while draining.
      CHECK(overlapped == p * (2 * m - 3 * p + 1) + p * (p - 1) / 2 - 1);
    }
  }
}

TEST_CASE("dualpipe-v at F = B = W = 1 and F&B = 3: every rank idles DeepSeek's (PP/2-1)(F&B+B-3W)",
          "[schedule][dualpipe-v]") {
  const int weight = 1, full_backward = 2;  // DeepSeek's W and B
  for (const int p : {2, 3, 4, 8}) {
    for (const int m : {2 * p, 2 * p + 1, 4 * p}) {
      CAPTURE(p, m);
      const int stages = 2 * p;  // DeepSeek's PP
      const SimulationResult result = simulate(dualpipe_v(p, m), unit_costs(0.0));
      for (const RankStats& rank : result.ranks) {
        CHECK(rank.idle == Approx((stages / 2 - 1) * (3 + full_backward - 3 * weight)));
      }
      const auto theory = theoretical_bubble(dualpipe_v(p, m), unit_costs(0.0));
      REQUIRE(theory);
      CHECK(theory->bubble.idle_over_useful == Approx(result.bubble().idle_over_useful));

      // Halves that overlap by half the shorter (F&B = 2.5): the formula is
      // then the worst rank's idle; rank 0, which overlaps least, idles less.
      const SimulationResult overlapped = simulate(dualpipe_v(p, m), unit_costs(0.5));
      double worst = 0.0;
      for (const RankStats& rank : overlapped.ranks) worst = std::max(worst, rank.idle);
      CHECK(worst == Approx((stages / 2 - 1) * (2.5 + full_backward - 3 * weight)));
    }
  }
}

TEST_CASE("dualpipe-v stashes DeepSeek's PP+1 microbatch-chunks on every rank", "[schedule][dualpipe-v]") {
  for (const int p : {1, 2, 4, 8}) {
    for (const int m : {2 * p, 4 * p}) {
      CAPTURE(p, m);
      const SimulationResult result = simulate(dualpipe_v(p, m), unit_costs(0.0));
      for (const RankStats& rank : result.ranks) CHECK(rank.peak_stashed == 2 * p + 1);
    }
  }
}

TEST_CASE("an F&B receives both halves' inputs before it and sends both outputs after it", "[schedule][dualpipe-v]") {
  const int p = 4;
  const Schedule s = dualpipe_v(p, 8);
  int checked = 0;
  for (int r = 1; r < p - 1; ++r) {  // inner ranks: both neighbours elsewhere on both chunks
    const auto& actions = s.ranks[r];
    for (std::size_t i = 2; i + 2 < actions.size(); ++i) {
      if (actions[i].kind != ActionKind::forward_backward) continue;
      const Action f = forward_half(actions[i]), bw = backward_half(actions[i]);
      CHECK(actions[i - 2].kind == ActionKind::recv_act);
      CHECK(actions[i - 2].microbatch == f.microbatch);
      CHECK(actions[i - 1].kind == ActionKind::recv_grad);
      CHECK(actions[i - 1].microbatch == bw.microbatch);
      CHECK(actions[i + 1].kind == ActionKind::send_act);
      CHECK(actions[i + 1].chunk == f.chunk);
      CHECK(actions[i + 2].kind == ActionKind::send_grad);
      CHECK(actions[i + 2].chunk == bw.chunk);
      ++checked;
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("dualpipe-v survives the text form and draws its F&B's", "[schedule][dualpipe-v]") {
  const Schedule s = dualpipe_v(2, 4);
  const ScheduleFile file = parse_text(to_text(s), "dualpipe-v.txt");
  CHECK(file.schedule.ranks == s.ranks);
  CHECK(to_text(s).find("F&B mb=") != std::string::npos);
  const SimulationResult result = simulate(s, unit_costs(0.0));
  std::ostringstream svg;
  write_svg_timeline(svg, s, result);
  CHECK(svg.str().find("F&amp;B mb=") != std::string::npos);  // escaped in the box titles
  CHECK(svg.str().find("F&B") == std::string::npos);          // never raw markup
  const auto ascii = ascii_timeline(s, result, 400);
  REQUIRE(ascii);
  CHECK(ascii->find("&BW") != std::string::npos);
}

TEST_CASE("dualpipe-v refuses m < 2p and v != 2 in deck keys", "[schedule][dualpipe-v]") {
  const ScheduleInfo& info = find_schedule("dualpipe-v");
  CHECK_THAT(*info.check({4, 2, 7, 2, 1, {}}),
             Catch::Contains("needs m >= 2p") && Catch::Contains("raise train.global_batch to at least 16"));
  CHECK_THAT(*info.check({4, 1, 8, 2, 1, {}}), Catch::Contains("set pipeline.virtual_stages = 2"));
  CHECK_FALSE(info.check({4, 2, 8, 2, 1, {}}));
}
