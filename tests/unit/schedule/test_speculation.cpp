// The speculative heads train.post_validation runs before the previous update
// stands: against 1F1B's warm-up formula, and against their defining
// properties on every training schedule (forward work only; every message a
// head receives comes from its sender's head; every other message a head
// sends is left to drop).
#include <map>
#include <tuple>

#include "catch.hpp"
#include "kpipe/schedule/action.hpp"
#include "kpipe/schedule/simulate.hpp"
#include "kpipe/schedule/speculation.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using kpipe::schedule::testing::lowered;

namespace {

int forwards_in(const std::vector<Action>& actions, std::size_t end) {
  int count = 0;
  for (std::size_t i = 0; i < end; ++i) count += actions[i].kind == ActionKind::forward;
  return count;
}

}  // namespace

TEST_CASE("a 1F1B rank's head is its warm-up and first forward", "[schedule][speculation]") {
  for (const int p : {2, 4, 8}) {
    const Schedule s = lowered("1f1b", p, 2 * p);
    const auto heads = speculative_heads(s);
    REQUIRE(heads.size() == static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      INFO("p = " << p << ", rank " << r);
      // p - r - 1 warm-up forwards, then the steady state's first F before its first B.
      CHECK(forwards_in(s.ranks[r], heads[r].end) == p - r);
      CHECK(s.ranks[r][heads[r].end].kind == (r == p - 1 ? ActionKind::backward : ActionKind::recv_grad));
      // Rank r - 1's head sends one activation more than rank r's head takes.
      CHECK(heads[r].drained.size() == (r == 0 ? 0u : 1u));
    }
  }
}

TEST_CASE("heads run forward work only and receive only what other heads send", "[schedule][speculation]") {
  for (const auto& [name, v] : kpipe::schedule::testing::training_schedules) {
    for (const int p : {2, 4}) {
      const Schedule s = lowered(name, p, 4 * p, v);
      const auto heads = speculative_heads(s);
      std::map<std::tuple<int, int, int>, bool> sent_in_head;  // (sender, receiver, tag)
      for (int r = 0; r < p; ++r) {
        for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
          const Action& a = s.ranks[r][i];
          if (is_send(a.kind)) sent_in_head[{r, a.peer, a.tag}] = i < heads[r].end;
        }
      }
      for (int r = 0; r < p; ++r) {
        INFO(name << " p = " << p << ", rank " << r);
        CHECK(forwards_in(s.ranks[r], heads[r].end) >= 1);
        std::size_t drained = 0;
        for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
          const Action& a = s.ranks[r][i];
          if (i < heads[r].end) {
            CHECK((a.kind == ActionKind::forward || a.kind == ActionKind::loss || a.kind == ActionKind::send_act ||
                   a.kind == ActionKind::recv_act));
            if (is_receive(a.kind)) CHECK(sent_in_head.at({a.peer, r, a.tag}));
          } else if (is_receive(a.kind) && sent_in_head.at({a.peer, r, a.tag})) {
            REQUIRE(drained < heads[r].drained.size());
            CHECK(heads[r].drained[drained++] == i);
          }
        }
        CHECK(drained == heads[r].drained.size());
      }
    }
  }
  // ZB-H2's parallelogram: rank 0 runs p forwards more than the last rank before validating.
  const Schedule h2 = lowered("zb-h2", 4, 16);
  const auto heads = speculative_heads(h2);
  CHECK(forwards_in(h2.ranks[0], heads[0].end) - forwards_in(h2.ranks[3], heads[3].end) >= 3);
}

// Without a barrier between steps a rank starts the next step as soon as its
// own ends: 1F1B and ZB-H1 gain nothing (rank 0 ends last and starts first),
// ZB-H2 and ZB-V lose their whole ramp (the Zero Bubble paper's figure 4):
// their steady bubble is the one within spans, 0 at F = B = W.
TEST_CASE("post-validated steps keep 1F1B's bubble and remove ZB-H2's and ZB-V's", "[schedule][speculation]") {
  const CostModel unit = kpipe::schedule::testing::unit_forward_input_weight();
  for (const int p : {2, 4, 8}) {
    const int m = 4 * p;
    INFO("p = " << p);
    const Bubble one_f_one_b = post_validated_bubble(lowered("1f1b", p, m), unit);
    CHECK(one_f_one_b.idle_over_useful == Approx(static_cast<double>(p - 1) / m).epsilon(1e-12));
    const Schedule h1 = lowered("zb-h1", p, m);
    CHECK(post_validated_bubble(h1, unit).idle_over_useful ==
          Approx(simulate(h1, unit).bubble().idle_over_useful).epsilon(1e-12));
    for (const auto& [name, v] : {std::pair{"zb-h2", 1}, {"zb-v", 2}}) {
      INFO(name);
      const Schedule s = lowered(name, p, m, v);
      CHECK(simulate(s, unit).bubble().idle_over_useful > 0.0);
      CHECK(post_validated_bubble(s, unit).idle_over_useful == Approx(0.0).margin(1e-12));
    }
    // Each rank's optimizer step lengthens the period by its own work, not by idle time.
    CostModel updating = unit;
    updating.optimizer_step = 5.0;
    for (const auto& [name, v] : {std::pair{"1f1b", 1}, {"zb-h1", 1}, {"zb-h2", 1}, {"zb-v", 2}}) {
      INFO(name << " with an optimizer step");
      const Schedule s = lowered(name, p, m, v);
      CHECK(post_validated_bubble(s, updating).idle_over_useful ==
            Approx(post_validated_bubble(s, unit).idle_over_useful).margin(1e-12));
    }
  }
}
