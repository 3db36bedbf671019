#include "kpipe/runtime/execution/timed_choice.hpp"

#include <functional>
#include <stdexcept>
#include <vector>

#include "catch.hpp"

using kpipe::runtime::TimedChoice;
using Ways = std::vector<int>;

namespace {

// The ways of `steps` steps, step s in way w taking seconds(s, w).
Ways run(TimedChoice& choice, int steps, const std::function<double(int, int)>& seconds) {
  Ways ways;
  for (int s = 0; s < steps; ++s) {
    ways.push_back(choice.way());
    choice.record(seconds(s, choice.way()));
  }
  return ways;
}

}  // namespace

TEST_CASE("each way is timed in turn, then the faster runs, the other timed again every period", "[timed_choice]") {
  TimedChoice choice(2, 5);
  // Way 1 takes half as long.
  const Ways ways = run(choice, 16, [](int, int way) { return way == 1 ? 1.0 : 2.0; });
  CHECK(ways == Ways{0, 0, 1, 1, /* period */ 1, 1, 1, 1, 1, /* probe */ 0, 0, /* period */ 1, 1, 1, 1, 1});
}

TEST_CASE("the way that was slower takes over at the next probe once it is faster", "[timed_choice]") {
  TimedChoice choice(2, 4);
  // Way 0 is the slower for the first 8 steps (the host's cores far apart, say), the faster after.
  const Ways ways = run(choice, 16, [](int step, int way) {
    if (step < 8) return way == 0 ? 3.0 : 1.0;
    return way == 0 ? 0.5 : 3.0;
  });
  // Steps 0-3 time both (way 1 faster), 4-7 run way 1, 8-9 time way 0 again, now the faster.
  CHECK(ways == Ways{0, 0, 1, 1, 1, 1, 1, 1, 0, 0, /* period */ 0, 0, 0, 0, /* probe */ 1, 1});
}

TEST_CASE("a way keeps running while it stays the faster, and equal times keep way 0", "[timed_choice]") {
  TimedChoice faster_first(3, 3);
  CHECK(run(faster_first, 12, [](int, int way) { return way == 0 ? 1.0 : 2.0; }) ==
        Ways{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1});
  TimedChoice tie(1, 2);
  CHECK(run(tie, 5, [](int, int) { return 1.0; }) == Ways{0, 1, 0, 0, 1});
}

TEST_CASE("one disturbed step among a probe's does not decide", "[timed_choice]") {
  TimedChoice choice(3, 4);
  // Way 0's second step was preempted (9 s); its median is still 1 s, way 1's 1.5 s.
  const double way0[] = {1.0, 9.0, 1.0};
  const Ways ways = run(choice, 8, [&](int step, int way) { return way == 0 ? (step < 3 ? way0[step] : 1.0) : 1.5; });
  CHECK(ways == Ways{0, 0, 0, 1, 1, 1, 0, 0});
}

TEST_CASE("a probe or period of no steps is refused", "[timed_choice]") {
  CHECK_THROWS_AS(TimedChoice(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(TimedChoice(2, 0), std::invalid_argument);
}
