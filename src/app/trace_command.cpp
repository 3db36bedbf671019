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
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/measurement/profile_timelines.hpp"
#include "kpipe/schedule/render.hpp"

namespace kpipe::app {

namespace {

using schedule::Timeline;

std::string bubble_text(const Timeline& t) {
  return fmt::format("makespan {:.3f} ms, bubble idle/useful {:.3f}, idle/total {:.3f}", t.makespan,
                     t.bubble.idle_over_useful, t.bubble.idle_over_total);
}

}  // namespace

int trace_command(const runtime::Environment& env, const TraceOptions& options) {
  protect_input(options.profile_path);
  require_writable(options.json_path, "--json");
  require_writable(options.svg_path, "--svg");
  const runtime::ProfileTimelines timelines(options.profile_path);
  const auto& info = timelines.info();
  log::info("profile: {} schedule, p = {}, v = {}, m = {}, d = {}, {} steps, {} actions; kpipe {}, {}, written {}",
            info.schedule, info.p, info.v, info.m, info.d, info.steps, timelines.actions(), info.software_version,
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
