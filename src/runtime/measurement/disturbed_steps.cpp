#include "kpipe/runtime/measurement/disturbed_steps.hpp"

#include <algorithm>

namespace kpipe::runtime {

DisturbedSteps disturbed_steps(const std::vector<double>& step_seconds, double factor) {
  if (step_seconds.size() < 2) return {};
  std::vector<double> steady(step_seconds.begin() + 1, step_seconds.end());
  const auto middle = steady.begin() + static_cast<std::ptrdiff_t>(steady.size() / 2);
  std::nth_element(steady.begin(), middle, steady.end());
  double median = *middle;
  if (steady.size() % 2 == 0) median = (median + *std::max_element(steady.begin(), middle)) / 2;
  DisturbedSteps disturbed{median, {}};
  for (std::size_t i = 1; i < step_seconds.size(); ++i) {
    if (step_seconds[i] > factor * median) disturbed.steps.push_back(i);
  }
  return disturbed;
}

}  // namespace kpipe::runtime
