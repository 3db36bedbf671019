#include "kpipe/runtime/measurement/calibration_recorder.hpp"

#include <algorithm>
#include <limits>

#include "kpipe/comm/collectives.hpp"

namespace kpipe::runtime {

namespace {

constexpr std::size_t row_width = 4;  // step, index, start, end (on the shared clock)

}  // namespace

void CalibrationRecorder::add_step(double step_start, double seconds, const runtime::StepResult& result) {
  Step step{added_++, step_start, seconds, result.timings};
  if (!warm_up_) {
    warm_up_ = std::move(step);
    return;
  }
  steady_.offer(std::move(step));
}

std::optional<schedule::Calibration> CalibrationRecorder::finish(const std::vector<std::size_t>& left_out) const {
  std::vector<Step> steps = steady_.items();
  if (steps.empty() && warm_up_) steps.push_back(*warm_up_);
  std::vector<double> rows;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    for (const runtime::ActionTiming& t : steps[k].timings) {
      rows.insert(rows.end(), {static_cast<double>(k), static_cast<double>(t.index), steps[k].start + t.start,
                               steps[k].start + t.end});
    }
  }
  const auto& grid = pipeline_.grid();
  std::vector<int> counts;
  const std::vector<double> all = comm::gather_varying_to_root(grid.world(), rows, &counts);
  if (comm::rank_of(grid.world()) != 0 || steps.empty()) return std::nullopt;

  // The pipeline of replica 0: world ranks 0 to p-1 are its pipeline ranks.
  const schedule::Schedule& s = pipeline_.schedule();
  std::vector<schedule::Timeline> timelines(steps.size());
  for (auto& t : timelines) {
    t.name = s.name;
    t.p = s.p;
    t.v = s.v;
    t.m = s.m;
    t.unit = "s";
    t.ranks.resize(static_cast<std::size_t>(s.p));
  }
  std::size_t at = 0;
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    for (int i = 0; i < counts[r] / static_cast<int>(row_width); ++i, at += row_width) {
      if (r >= s.p) continue;
      const double* row = &all[at];
      const auto step = static_cast<std::size_t>(row[0]);
      const schedule::Action& a = s.ranks[r][static_cast<std::size_t>(row[1])];
      timelines[step].ranks[r].push_back(
          {a, a.chunk >= 0 ? s.placement.stage(r, a.chunk) : -1, static_cast<int>(step), row[2], row[3]});
    }
  }
  // Each step from its first rank's start, as the simulator starts every rank at 0.
  for (auto& t : timelines) {
    double first = std::numeric_limits<double>::infinity();
    for (const auto& rank : t.ranks) {
      if (!rank.empty()) first = std::min(first, rank.front().start);
    }
    for (auto& rank : t.ranks) {
      for (auto& a : rank) {
        a.start -= first;
        a.end -= first;
      }
    }
  }
  // Steps disturbed from outside the run describe the disturbance, not the
  // schedule: a stall of a few milliseconds would enter the spread that every
  // simulated action draws from.
  const auto kept = [&](const Step& step) {
    return !std::binary_search(left_out.begin(), left_out.end(), step.number);
  };
  if (std::any_of(steps.begin(), steps.end(), kept)) {
    std::size_t to = 0;
    for (std::size_t k = 0; k < steps.size(); ++k) {
      if (!kept(steps[k])) continue;
      if (to != k) {
        steps[to] = std::move(steps[k]);
        timelines[to] = std::move(timelines[k]);
      }
      ++to;
    }
    steps.resize(to);
    timelines.resize(to);
  }
  double seconds = 0.0;
  for (const Step& step : steps) seconds += step.seconds / steps.size();
  // A message is b rows of the boundary: the output of this rank's first chunk.
  const int b = pipeline_.spec().microbatch_size;
  const std::int64_t bytes = s.p > 1
                                 ? std::int64_t{b} * pipeline_.chunk(0).output_dim() *
                                       static_cast<std::int64_t>(tensor::size_of(pipeline_.chunk(0).boundary_dtype()))
                                 : 0;
  return schedule::measure_calibration(timelines, b, seconds, bytes);
}

}  // namespace kpipe::runtime
