#pragma once
// Renderers of a simulated schedule: a text table and an ASCII timeline for
// terminals, an SVG timeline in the style of the papers' pipeline figures,
// Chrome-trace JSON for Perfetto, and JSON for scripts. Actions carry the same
// names everywhere (F, B, W, BW, SEND_ACT, ...). The timelines need a
// simulation with Record::every_action.

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/simulate.hpp"
#include "kpipe/schedule/timeline.hpp"

namespace kpipe::schedule {

// Per rank: busy, idle, idle share, peak stashed activations, bytes sent.
std::string summary_table(const Schedule& schedule, const SimulationResult& result);

// One row per rank, time left to right, boxes labelled with kind and
// microbatch ("F3", "B3"; "F3.1" for chunk 1 when v > 1), '.' for idle.
// nullopt when the timeline would be wider than `max_columns`.
std::optional<std::string> ascii_timeline(const Schedule& schedule, const SimulationResult& result, int max_columns);
// False when the ASCII timeline cannot fit whatever the times: every box
// takes at least 3 columns. Lets large plans skip recording every action.
bool ascii_timeline_can_fit(const Schedule& schedule, int max_columns);

// The SVG timeline draws at most limits::svg_compute_actions boxes; beyond
// that an input error suggests --trace. require_svg_fits checks a count (or a
// lower bound, such as p·v·m before the plan is generated) without drawing.
void require_svg_fits(double compute_actions);
void write_svg_timeline(std::ostream& out, const Schedule& schedule, const SimulationResult& result);
// Timelines of one schedule one above the other on one time scale, each
// headed by its label and its makespan and bubble: a measured run drawn above
// its simulation shows the bubble the model did not predict.
void write_svg_timelines(std::ostream& out, const std::vector<Timeline>& panels);

// Chrome trace-event JSON: one complete event per compute action, one thread
// per rank; one simulated time unit is shown as one millisecond.
void write_chrome_trace(std::ostream& out, const Schedule& schedule, const SimulationResult& result);

// Chrome trace-event JSON of a timeline (a measured run): one complete event
// per action, named as in the text form ("F mb=3 chunk=0"), with one process
// per rank (pid = rank). Times are in the timeline's unit, scaled by
// microseconds_per_unit (1000 for milliseconds).
struct TraceOptions {
  std::string title;  // names the processes: "<title> rank <r>"
  double microseconds_per_unit = 1000.0;
};
void write_chrome_trace(std::ostream& out, const Timeline& timeline, const TraceOptions& options);

// The plan summary for scripts: shape, makespan, theoretical and simulated
// bubble (both normalisations, labelled; `post_validated`: post_validated_bubble
// of a training schedule, null otherwise), per-rank statistics, bytes moved.
std::string summary_json(const Schedule& schedule, const CostModel& costs, const SimulationResult& result,
                         const std::optional<Bubble>& post_validated, int data_parallel);

}  // namespace kpipe::schedule
