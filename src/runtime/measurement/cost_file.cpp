#include "kpipe/runtime/measurement/cost_file.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/runtime/measurement/profile_timelines.hpp"

namespace kpipe::runtime {

namespace {

// A profile's steady steps (step 0 warms up) of replica 0 on the clock its ranks share.
schedule::Calibration profile_calibration(const std::string& path) {
  const ProfileTimelines profile(path, ProfileTimelines::Unit::seconds);
  const int steps = profile.steps();
  if (steps < 3) {
    throw input_error(fmt::format(
        "the profile '{}' holds {} steps; calibrating needs 3 or more (the first warms up, and a step's length is "
        "the time to the next one's start): run with train.steps >= 3",
        printable(path), steps));
  }
  std::vector<schedule::Timeline> timelines;  // steps 1 .. steps-2
  for (int k = 1; k < steps - 1; ++k) timelines.push_back(profile.one_step(k));
  // Rank 0's step lengths: from one step's start to the next's.
  double seconds = 0.0;
  for (int k = 1; k < steps - 1; ++k)
    seconds += (profile.step_start(0, k + 1) - profile.step_start(0, k)) / (steps - 2);
  return schedule::measure_calibration(timelines, static_cast<int>(profile.info().microbatch_size), seconds,
                                       profile.largest_send_bytes());
}

}  // namespace

schedule::CostFit read_cost_file(const std::string& path) {
  if (io::hdf5::is_hdf5(path)) {
    return schedule::fit_costs({profile_calibration(path)});
  }
  const std::string text =
      read_input_file(path, {"--costs file", limits::summary_json_bytes,
                             "; write one with 'kpipe run DECK --json FILE' or 'kpipe sweep DECK --json FILE'"});
  return schedule::read_costs_json(text, path);
}

}  // namespace kpipe::runtime
