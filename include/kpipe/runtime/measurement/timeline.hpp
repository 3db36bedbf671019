#pragma once
// Measured timelines: what each rank's actions really took, the bubble they
// imply, and per-stage costs for the simulator, so that a run can be compared
// with its prediction (DESIGN.md §2, "profiler").

#include <cstdint>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::runtime {

// One executed action: its index in the rank's action list and when it ran,
// in seconds since the step began on this rank.
struct ActionTiming {
  std::int32_t index = 0;
  double start = 0.0;
  double end = 0.0;
};

struct MeasuredBubble {
  // Seconds from the step start to the last compute action on any rank; for
  // steps without a barrier (train.post_validation) the ranks' mean step
  // period less their optimizer steps.
  double makespan = 0.0;
  schedule::Bubble bubble;
  schedule::Bubble span;  // idle only within each rank's span (SimulationResult::span_bubble)
};

// The bubble of one step of the pipeline `comm` ran, measured the way the
// simulator counts it: compute actions are busy, everything else is idle
// (over the makespan, and within each rank's first to last compute). Times
// count from each rank's own step start: where ranks start steps apart
// (train.post_validation) the makespan is a rank's step period.
MeasuredBubble measure_bubble(const schedule::Schedule& schedule, int rank, const std::vector<ActionTiming>& timings,
                              comm::Communicator pipeline);
// The same in two halves, for a gather that completes later: this rank's
// terms (busy seconds, span, last compute end, the step's wall seconds less
// its gradient sums and optimizer step), and
// the bubble from every pipeline rank's terms, rank after rank: over the
// makespan where a barrier ends each step, else over the ranks' mean period.
constexpr int bubble_term_count = 4;
std::vector<double> bubble_terms(const schedule::Schedule& schedule, int rank, const std::vector<ActionTiming>& timings,
                                 double step_seconds);
MeasuredBubble combine_bubble_terms(int p, const std::vector<double>& all, bool barrier);

// Mean measured seconds of F, B and W of every model stage over the timings of
// several steps, gathered over the pipeline: the costs the simulator needs to
// predict this run. LOSS counts into the last stage's F; a BW is split evenly
// into B and W, which the simulator adds back together.
schedule::CostModel measured_costs(const schedule::Schedule& schedule, int rank,
                                   const std::vector<std::vector<ActionTiming>>& steps, comm::Communicator pipeline);

}  // namespace kpipe::runtime
