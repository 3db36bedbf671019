#include "kpipe/runtime/measurement/profile_timelines.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::runtime {

namespace {

using schedule::Timeline;

Timeline empty_timeline(const io::Profile& profile, int ranks, const char* unit) {
  Timeline t;
  t.name = profile.info.schedule;
  t.p = ranks;
  t.v = static_cast<int>(profile.info.v);
  t.m = static_cast<int>(profile.info.m);
  t.unit = unit;
  t.ranks.resize(static_cast<std::size_t>(ranks));
  return t;
}

}  // namespace

ProfileTimelines::ProfileTimelines(const std::string& path, Unit unit)
    : profile_(io::read_profile(path)), units_per_second_(unit == Unit::milliseconds ? 1e3 : 1.0) {
  for (const std::string& name : profile_.kind_names) {
    const auto kind = schedule::parse_kind(name);
    if (!kind) {
      throw input_error(
          fmt::format("'{}' is not a readable kpipe profile: unknown action kind '{}' in the "
                      "attribute 'kinds'",
                      printable(path), printable(name)));
    }
    kinds_.push_back(*kind);
  }
}

Timeline ProfileTimelines::all_steps() const {
  Timeline t = empty_timeline(profile_, world_ranks(), unit());
  const io::ActionTable& m = profile_.measured;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double origin = step_start(m.rank[i], m.step[i]);
    t.ranks[m.rank[i]].push_back(timed(m, i, origin));
  }
  schedule::summarize(t);
  return t;
}

Timeline ProfileTimelines::one_step(int step) const {
  const int p = static_cast<int>(profile_.info.p);
  Timeline t = empty_timeline(profile_, p, unit());
  t.label = fmt::format("measured, step {} of {}", step, steps());
  double first = std::numeric_limits<double>::infinity();
  for (int r = 0; r < p; ++r) first = std::min(first, step_start(r, step));
  const io::ActionTable& m = profile_.measured;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m.step[i] != step || m.rank[i] >= p) continue;
    t.ranks[m.rank[i]].push_back(timed(m, i, step_start(m.rank[i], step) - first));
  }
  schedule::summarize(t);
  return t;
}

Timeline ProfileTimelines::predicted() const {
  const io::ActionTable& m = profile_.predicted;
  Timeline t = empty_timeline(profile_, m.size() > 0 ? static_cast<int>(profile_.info.p) : 0, unit());
  t.label = "simulated with the measured per-stage costs";
  for (std::size_t i = 0; i < m.size(); ++i) t.ranks[m.rank[i]].push_back(timed(m, i, 0.0));
  schedule::summarize(t);
  return t;
}

schedule::TimedAction ProfileTimelines::timed(const io::ActionTable& table, std::size_t i, double origin) const {
  schedule::TimedAction t;
  t.action.kind = kinds_[table.kind[i]];
  t.action.microbatch = table.microbatch[i];
  t.action.chunk = static_cast<std::int8_t>(table.chunk[i]);
  t.action.peer = static_cast<std::int16_t>(table.peer[i]);
  t.action.tag = table.tag[i];
  t.stage = table.stage[i];
  t.step = table.step[i];
  t.start = (origin + table.start[i]) * units_per_second_;
  t.end = (origin + table.end[i]) * units_per_second_;
  return t;
}

std::int64_t ProfileTimelines::largest_send_bytes() const {
  const io::ActionTable& m = profile_.measured;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m.rank[i] < profile_.info.p && schedule::is_send(kinds_[m.kind[i]])) bytes = std::max(bytes, m.bytes[i]);
  }
  return bytes;
}

}  // namespace kpipe::runtime
