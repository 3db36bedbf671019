#include "kpipe/runtime/cost_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/io/profile.hpp"

namespace kpipe::runtime {

namespace {

// A profile's steady steps (step 0 warms up) of replica 0 on the clock its ranks share.
schedule::Calibration profile_calibration(const io::Profile& profile, const std::string& path) {
  const io::ProfileInfo& info = profile.info;
  const auto steps = static_cast<int>(info.steps);
  if (steps < 3) {
    throw input_error(fmt::format(
        "the profile '{}' holds {} steps; calibrating needs 3 or more (the first warms up, and a step's length is "
        "the time to the next one's start): run with train.steps >= 3",
        printable(path), steps));
  }
  std::vector<schedule::ActionKind> kinds;
  for (const std::string& name : profile.kind_names) {
    const auto kind = schedule::parse_kind(name);
    if (!kind)
      throw input_error(fmt::format("'{}': unknown action kind '{}' in the profile", printable(path), printable(name)));
    kinds.push_back(*kind);
  }
  const auto start = [&](int rank, int step) {
    return profile.step_start[static_cast<std::size_t>(rank) * steps + step];
  };
  const int p = static_cast<int>(info.p);
  std::vector<schedule::Timeline> timelines(static_cast<std::size_t>(steps - 2));  // steps 1 .. steps-2
  for (auto& t : timelines) {
    t.name = info.schedule;
    t.p = p;
    t.v = static_cast<int>(info.v);
    t.m = static_cast<int>(info.m);
    t.ranks.resize(static_cast<std::size_t>(p));
  }
  const io::ActionTable& m = profile.measured;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m.step[i] < 1 || m.step[i] > steps - 2 || m.rank[i] >= p) continue;
    if (m.kind[i] < 0 || m.kind[i] >= static_cast<int>(kinds.size())) {
      throw input_error(
          fmt::format("'{}': /measured/kind[{}] = {} names no action kind", printable(path), i, m.kind[i]));
    }
    double first = std::numeric_limits<double>::infinity();
    for (int r = 0; r < p; ++r) first = std::min(first, start(r, m.step[i]));
    const double origin = start(m.rank[i], m.step[i]) - first;
    schedule::TimedAction t;
    t.action.kind = kinds[m.kind[i]];
    t.action.microbatch = m.microbatch[i];
    t.action.chunk = static_cast<std::int8_t>(m.chunk[i]);
    t.action.peer = static_cast<std::int16_t>(m.peer[i]);
    t.action.tag = m.tag[i];
    t.stage = m.stage[i];
    t.step = m.step[i];
    t.start = origin + m.start[i];
    t.end = origin + m.end[i];
    timelines[static_cast<std::size_t>(m.step[i] - 1)].ranks[m.rank[i]].push_back(t);
    if (schedule::is_send(t.action.kind)) bytes = std::max(bytes, m.bytes[i]);
  }
  // Rank 0's step lengths: from one step's start to the next's.
  double seconds = 0.0;
  for (int k = 1; k < steps - 1; ++k) seconds += (start(0, k + 1) - start(0, k)) / (steps - 2);
  return schedule::measure_calibration(timelines, static_cast<int>(info.microbatch_size), seconds, bytes);
}

}  // namespace

schedule::CostFit read_cost_file(const std::string& path) {
  if (io::hdf5::is_hdf5(path)) {
    return schedule::fit_costs({profile_calibration(io::read_profile(path), path)});
  }
  const std::string text =
      read_input_file(path, {"--costs file", limits::summary_json_bytes,
                             "; write one with 'kpipe run DECK --json FILE' or 'kpipe sweep DECK --json FILE'"});
  return schedule::read_costs_json(text, path);
}

}  // namespace kpipe::runtime
