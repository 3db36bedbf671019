#include "kpipe/runtime/measurement/disturbed_steps.hpp"

#include <vector>

#include "catch.hpp"

using kpipe::runtime::disturbed_steps;
using Indices = std::vector<std::size_t>;

TEST_CASE("a steady step over twice the median steady step is disturbed", "[disturbed_steps]") {
  // Steady steps 1.0 .. 1.8 ms around a median of 1.5 (the first step, 9 ms, warms up and is never counted).
  const std::vector<double> ms = {9.0, 1.5, 1.4, 6.4, 1.6, 1.0, 3.0, 1.8, 1.5};
  // Sorted steady steps: 1.0 1.4 1.5 1.5 1.6 1.8 3.0 6.4, median (1.5 + 1.6) / 2 = 1.55, the bound 3.1.
  CHECK(disturbed_steps(ms).median_seconds == Approx(1.55));
  CHECK(disturbed_steps(ms).steps == Indices{3});
  CHECK(disturbed_steps(ms, 1.9).steps == Indices{3, 6});  // 3.0 > 1.9 x 1.55 = 2.945
  // An odd count of steady steps: the middle one is the median (1.5), and 3.0 is exactly twice it.
  CHECK(disturbed_steps({9.0, 1.5, 1.4, 3.0, 1.6, 1.0}).median_seconds == 1.5);
  CHECK(disturbed_steps({9.0, 1.5, 1.4, 3.0, 1.6, 1.0}).steps.empty());
  CHECK(disturbed_steps({9.0, 1.5, 1.4, 3.01, 1.6, 1.0}).steps == Indices{3});
}

TEST_CASE("a run of at most one step, or of equal steps, has none disturbed", "[disturbed_steps]") {
  CHECK(disturbed_steps({}).steps.empty());
  CHECK(disturbed_steps({5.0}).steps.empty());
  CHECK(disturbed_steps({5.0, 1.0}).median_seconds == 1.0);
  CHECK(disturbed_steps({5.0, 1.0}).steps.empty());
  CHECK(disturbed_steps({5.0, 1.0, 1.0, 1.0}).steps.empty());
}
