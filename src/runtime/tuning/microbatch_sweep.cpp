#include "kpipe/runtime/tuning/microbatch_sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/environment.hpp"
#include "kpipe/runtime/measurement/calibration_recorder.hpp"
#include "kpipe/runtime/measurement/disturbed_steps.hpp"
#include "kpipe/runtime/training.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::runtime {

std::string size_list(const std::vector<int>& sizes) {
  std::string out;
  for (int b : sizes) out += (out.empty() ? "" : ", ") + std::to_string(b);
  return out;
}

void check_sweepable(const config::RunConfig& config, const char* who) {
  if (!config.pipeline.schedule_entry->trains) {
    throw input_error(fmt::format(
        "{} measures training steps, but pipeline.schedule = \"{}\" runs inference only; choose a training schedule",
        who, config.pipeline.schedule));
  }
  if (!config.pipeline.schedule_file.empty()) {
    throw input_error(fmt::format(
        "pipeline.schedule_file = \"{}\" fixes m, so {} cannot vary b; leave the schedule file out (the generated {} "
        "schedule) or give train.microbatch_size a number",
        printable(config.pipeline.schedule_file), who, config.pipeline.schedule));
  }
}

std::vector<int> sizes_to_measure(const config::RunConfig& config, const std::vector<int>& requested) {
  const int per_replica = config.train.global_batch / config.pipeline.data_parallel;
  std::vector<int> valid;
  for (int b = 1; b <= per_replica; ++b) {
    if (per_replica % b == 0) valid.push_back(b);
  }
  if (requested.empty()) return valid;
  std::vector<int> sizes;
  for (int b : requested) {
    if (per_replica % b != 0) {
      throw input_error(fmt::format(
          "--sizes: b = {} does not divide B/d = {}/{} = {}, so m would not be an integer; valid sizes are {}", b,
          config.train.global_batch, config.pipeline.data_parallel, per_replica, size_list(valid)));
    }
    if (std::find(sizes.begin(), sizes.end(), b) == sizes.end()) sizes.push_back(b);
  }
  return sizes;
}

SizeMeasurement measure_size(const config::RunConfig& config, int steps) {
  // What earlier measurements of this process freed is not this one's.
  release_free_memory();
  reset_peak_resident();
  const auto pipeline = build_pipeline(config, Mode::train);
  CalibrationRecorder recorder(*pipeline);
  comm::barrier(comm::world());
  const double start = comm::wall_time();
  std::vector<double> step_seconds;
  for (int step = 0; step <= steps; ++step) {
    const double step_start = comm::wall_time();
    const runtime::StepResult result = abort_on_error([&] { return pipeline->run_step(step); });
    runtime::global_loss(pipeline->grid(), result);  // as kpipe run does in every step
    const double seconds = comm::wall_time() - step_start;
    recorder.add_step(step_start - start, seconds, result);
    step_seconds.push_back(seconds);
  }
  const double measured_seconds =
      std::accumulate(step_seconds.begin() + 1, step_seconds.end(), 0.0);  // after the first
  SizeMeasurement size;
  size.b = config.train.microbatch_size;
  size.m = pipeline->schedule().m;
  size.schedule = pipeline->schedule();
  size.measured_samples_per_second = config.train.global_batch * steps / measured_seconds;
  size.peak_activation_mib =
      comm::max(comm::world(), static_cast<double>(peak_stashed_bytes(*pipeline))) / double(1 << 20);
  size.peak_resident_mib = comm::max(comm::world(), static_cast<double>(peak_resident_bytes())) / double(1 << 20);
  size.calibration = recorder.finish(disturbed_steps(step_seconds).steps);  // as kpipe run's
  std::vector<double> rate = {size.measured_samples_per_second};
  comm::broadcast(comm::world(), 0, rate);
  size.measured_samples_per_second = rate.front();
  return size;
}

}  // namespace kpipe::runtime
