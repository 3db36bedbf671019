#pragma once
// Steps that something outside the run slowed down: a hypervisor taking a
// vCPU away for milliseconds, a daemon waking, a neighbour's job. Every
// training step does the same work, so a steady step (any but the first,
// which warms caches and pools) that takes over `factor` times the median
// steady step was disturbed, not slowed by its schedule. One such step on one
// rank leaves its peers idle for as long, and a mean over a run weighs it as
// many ordinary steps: `kpipe run` reports the bubble with and without them.

#include <cstddef>
#include <vector>

namespace kpipe::runtime {

inline constexpr double disturbed_step_factor = 2.0;

struct DisturbedSteps {
  double median_seconds = 0.0;     // of the steady steps; 0 where there are none
  std::vector<std::size_t> steps;  // indices into the step times, ascending
};

// The steps of `step_seconds` (each step's time, in step order) over
// `factor` times the median steady step; none where there is at most one step.
DisturbedSteps disturbed_steps(const std::vector<double>& step_seconds, double factor = disturbed_step_factor);

}  // namespace kpipe::runtime
