#pragma once
// A timeline: the actions of every rank with when they ran, simulated or
// measured. It is what the SVG and Chrome-trace renderers draw, so a profile
// of a run (kpipe trace) and a plan (kpipe plan) are drawn by the same code.

#include <string>
#include <vector>

#include "kpipe/schedule/action.hpp"
#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule {

struct TimedAction {
  Action action;
  int stage = -1;  // the model stage of the action's chunk; -1 for step-level actions
  int step = -1;   // the training step of a measured action; -1 in a simulation
  double start = 0.0;
  double end = 0.0;
};

struct Timeline {
  std::string name;  // the schedule's
  int p = 1, v = 1, m = 1;
  std::string label;  // drawn above the rows when several timelines share a figure ("measured, step 3")
  std::string unit;   // of the times, e.g. "ms"; empty: simulated units (sim.cost_* of the deck)
  std::vector<std::vector<TimedAction>> ranks;  // ranks[r]: what rank r ran, in order
  double makespan = 0.0;
  Bubble bubble;
};

// Every action of a simulated schedule with its simulated start and end
// (simulate() with Record::every_action); makespan and bubble are the simulation's.
Timeline simulated_timeline(const Schedule& schedule, const SimulationResult& result);

// Sets makespan and bubble of a measured timeline the way runtime::measure_bubble
// counts them: F, B, W, BW and LOSS are busy, everything else is idle, and the
// makespan ends with the last of them on any rank.
void summarize(Timeline& timeline);

}  // namespace kpipe::schedule
