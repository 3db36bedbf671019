// `kpipe trace PROFILE.h5`: a profile of `kpipe run --profile` as Chrome-trace
// JSON (every executed action of every step, one process per rank) and as an
// SVG of one step, measured above the simulation of the same plan with the
// measured per-stage costs, so the bubble the model did not predict shows.

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "commands.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/io/profile.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/timeline.hpp"
#include "output_file.hpp"

namespace kpipe::app {

namespace {

using schedule::ActionKind;
using schedule::Timeline;

constexpr double milliseconds_per_second = 1e3;

Timeline empty_timeline(const io::Profile& profile, int ranks) {
  Timeline t;
  t.name = profile.info.schedule;
  t.p = ranks;
  t.v = static_cast<int>(profile.info.v);
  t.m = static_cast<int>(profile.info.m);
  t.unit = "ms";
  t.ranks.resize(static_cast<std::size_t>(ranks));
  return t;
}

class ProfileTimelines {
 public:
  ProfileTimelines(const io::Profile& profile, const std::string& path) : profile_(profile) {
    for (const std::string& name : profile.kind_names) {
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

  int world_ranks() const { return static_cast<int>(profile_.info.p * profile_.info.d); }
  int steps() const { return static_cast<int>(profile_.info.steps); }
  double step_start(int rank, int step) const {
    return profile_.step_start[static_cast<std::size_t>(rank) * steps() + step];
  }

  // Every action of every step on every rank, on the clock all ranks share.
  Timeline all_steps() const {
    Timeline t = empty_timeline(profile_, world_ranks());
    const io::ActionTable& m = profile_.measured;
    for (std::size_t i = 0; i < m.size(); ++i) {
      const double origin = step_start(m.rank[i], m.step[i]);
      t.ranks[m.rank[i]].push_back(timed(m, i, origin));
    }
    schedule::summarize(t);
    return t;
  }

  // One step of the pipeline of replica 0, from the first of its ranks to begin it.
  Timeline one_step(int step) const {
    const int p = static_cast<int>(profile_.info.p);
    Timeline t = empty_timeline(profile_, p);
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

  // The simulator's step with the measured per-stage costs; no ranks when the profile has none.
  Timeline predicted() const {
    const io::ActionTable& m = profile_.predicted;
    Timeline t = empty_timeline(profile_, m.size() > 0 ? static_cast<int>(profile_.info.p) : 0);
    t.label = "simulated with the measured per-stage costs";
    for (std::size_t i = 0; i < m.size(); ++i) t.ranks[m.rank[i]].push_back(timed(m, i, 0.0));
    schedule::summarize(t);
    return t;
  }

 private:
  schedule::TimedAction timed(const io::ActionTable& table, std::size_t i, double origin) const {
    schedule::TimedAction t;
    t.action.kind = kinds_[table.kind[i]];
    t.action.microbatch = table.microbatch[i];
    t.action.chunk = static_cast<std::int8_t>(table.chunk[i]);
    t.action.peer = static_cast<std::int16_t>(table.peer[i]);
    t.action.tag = table.tag[i];
    t.stage = table.stage[i];
    t.step = table.step[i];
    t.start = (origin + table.start[i]) * milliseconds_per_second;
    t.end = (origin + table.end[i]) * milliseconds_per_second;
    return t;
  }

  const io::Profile& profile_;
  std::vector<ActionKind> kinds_;
};

std::string bubble_text(const Timeline& t) {
  return fmt::format("makespan {:.3f} ms, bubble idle/useful {:.3f}, idle/total {:.3f}", t.makespan,
                     t.bubble.idle_over_useful, t.bubble.idle_over_total);
}

}  // namespace

int trace_command(const Environment& env, const TraceOptions& options) {
  protect_input(options.profile_path);
  require_writable(options.json_path, "--json");
  require_writable(options.svg_path, "--svg");
  const io::Profile profile = io::read_profile(options.profile_path);
  const ProfileTimelines timelines(profile, options.profile_path);
  const io::ProfileInfo& info = profile.info;
  log::info("profile: {} schedule, p = {}, v = {}, m = {}, d = {}, {} steps, {} actions; kpipe {}, {}, written {}",
            info.schedule, info.p, info.v, info.m, info.d, info.steps, profile.measured.size(), info.software_version,
            info.device, info.date);
  if (timelines.steps() == 0)
    throw input_error(fmt::format("the profile '{}' holds no step", printable(options.profile_path)));
  const int step = options.step < 0 ? timelines.steps() - 1 : options.step;
  if (step >= timelines.steps()) {
    throw input_error(fmt::format("--step {}: the profile holds steps 0 to {}", step, timelines.steps() - 1));
  }

  const Timeline measured = timelines.one_step(step);
  const Timeline predicted = timelines.predicted();
  log::info("step {} measured: {}", step, bubble_text(measured));
  if (predicted.p > 0) log::info("step {} simulated with the measured costs: {}", step, bubble_text(predicted));

  // Both outputs are built before any file is touched: a step too large to draw is an input error.
  std::string svg;
  if (!options.svg_path.empty()) {
    std::vector<Timeline> panels = {measured};
    if (predicted.p > 0) panels.push_back(predicted);
    std::ostringstream text;
    schedule::write_svg_timelines(text, panels);
    svg = text.str();
  }
  if (env.rank() != 0) return 0;
  write_output(options.svg_path, "--svg", [&](std::ostream& out) { out << svg; });
  write_output(options.json_path, "--json", [&](std::ostream& out) {
    const std::string title = fmt::format("kpipe profile: {} p={} v={} m={}", info.schedule, info.p, info.v, info.m);
    schedule::write_chrome_trace(out, timelines.all_steps(), {title, 1000.0});
  });
  if (options.json_path.empty() && options.svg_path.empty()) {
    log::info("(write the timelines with --json FILE (Perfetto) or --svg FILE)");
  }
  return 0;
}

}  // namespace kpipe::app
