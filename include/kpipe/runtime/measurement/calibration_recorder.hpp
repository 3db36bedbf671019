#pragma once
// What `kpipe run --json` and `kpipe sweep` calibrate the simulator from:
// each rank keeps its steady steps' action timings (the first step warms
// caches and pools and is left out; at most `kept_steps`, spread evenly over
// the whole run, so that the calibration describes the steps the run's
// summary averages, not only the last ones), then they are gathered to world
// rank 0 and measured there (schedule::measure_calibration) on the clock all
// ranks share.

#include <optional>
#include <vector>

#include "kpipe/core/even_sample.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/schedule/calibration.hpp"

namespace kpipe::runtime {

class CalibrationRecorder {
 public:
  explicit CalibrationRecorder(const runtime::Pipeline<float>& pipeline) : pipeline_(pipeline) {}

  // `step_start`: when this rank began the step, in seconds on a clock all
  // ranks share; `seconds`: the step's wall time.
  void add_step(double step_start, double seconds, const runtime::StepResult& result);
  // Collective over the world: the calibration on world rank 0, nullopt on
  // the others and when no step was recorded. `left_out` (world rank 0's):
  // the steps, numbered from 0 in add_step order, that the calibration must
  // not describe (disturbed_steps.hpp), ascending; all count where that would
  // leave none.
  std::optional<schedule::Calibration> finish(const std::vector<std::size_t>& left_out = {}) const;

 private:
  struct Step {
    std::size_t number = 0;  // in add_step order
    double start = 0.0, seconds = 0.0;
    std::vector<runtime::ActionTiming> timings;
  };
  static constexpr std::size_t kept_steps = 64;  // bounds what a long run keeps and gathers

  const runtime::Pipeline<float>& pipeline_;
  std::optional<Step> warm_up_;  // the first step, used only when it is the only one
  std::size_t added_ = 0;
  EvenSample<Step> steady_{kept_steps};
};

}  // namespace kpipe::runtime
