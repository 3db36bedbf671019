#include "kpipe/runtime/measurement/timeline.hpp"

#include <algorithm>
#include <vector>

#include "kpipe/schedule/action.hpp"

namespace kpipe::runtime {

std::vector<double> bubble_terms(const schedule::Schedule& schedule, int rank, const std::vector<ActionTiming>& timings,
                                 double step_seconds) {
  // LOSS runs inside the last stage's forward work (the simulator folds it into F).
  double busy = 0.0, first_start = -1.0, last_end = 0.0, tail = 0.0;
  for (const auto& t : timings) {
    const auto kind = schedule.ranks[rank][t.index].kind;
    if (schedule::is_step_level(kind)) {
      tail += t.end - t.start;
      continue;
    }
    if (!schedule::is_compute(kind) && kind != schedule::ActionKind::loss) continue;
    busy += t.end - t.start;
    if (first_start < 0.0) first_start = t.start;
    last_end = std::max(last_end, t.end);
  }
  // A rank updating its weights is not idle: out of its period, as the
  // makespan after a barrier leaves the update out.
  return {busy, first_start < 0.0 ? 0.0 : last_end - first_start, last_end, std::max(0.0, step_seconds - tail)};
}

MeasuredBubble combine_bubble_terms(int p, const std::vector<double>& all, bool barrier) {
  double busy = 0.0, spans = 0.0, makespan = 0.0, period = 0.0;
  for (std::size_t r = 0; r + bubble_term_count <= all.size(); r += bubble_term_count) {
    busy += all[r];
    spans += all[r + 1];
    makespan = std::max(makespan, all[r + 2]);
    period += all[r + 3] / p;
  }
  // Without a barrier every rank's steps follow each other at the same mean
  // period (less its optimizer step); with one, the step ends at the last compute.
  if (!barrier) makespan = period;
  const double idle = p * makespan - busy;
  MeasuredBubble measured;
  measured.makespan = makespan;
  measured.bubble.idle_over_useful = busy > 0 ? idle / busy : 0.0;
  measured.bubble.idle_over_total = makespan > 0 ? idle / (p * makespan) : 0.0;
  measured.span.idle_over_useful = busy > 0 ? (spans - busy) / busy : 0.0;
  measured.span.idle_over_total = spans > 0 ? (spans - busy) / spans : 0.0;
  return measured;
}

MeasuredBubble measure_bubble(const schedule::Schedule& schedule, int rank, const std::vector<ActionTiming>& timings,
                              comm::Communicator pipeline) {
  // One gather per step, not a reduction per figure.
  return combine_bubble_terms(schedule.p, comm::all_gather(pipeline, bubble_terms(schedule, rank, timings, 0.0)), true);
}

schedule::CostModel measured_costs(const schedule::Schedule& schedule, int rank,
                                   const std::vector<std::vector<ActionTiming>>& steps, comm::Communicator pipeline) {
  using schedule::ActionKind;
  const int v = schedule.v;
  // Per chunk: seconds of F (with LOSS), B, W and BW, and how many F, B, W, BW ran.
  std::vector<double> seconds(4 * static_cast<std::size_t>(v), 0.0), counts(4 * static_cast<std::size_t>(v), 0.0);
  for (const auto& timings : steps) {
    for (const auto& t : timings) {
      const auto& action = schedule.ranks[rank][t.index];
      const int k = schedule::compute_slot(action.kind);
      if (k < 0) continue;
      seconds[4 * action.chunk + k] += t.end - t.start;
      if (action.kind != ActionKind::loss) counts[4 * action.chunk + k] += 1;
    }
  }
  std::vector<double> mine(3 * static_cast<std::size_t>(v));  // mean F, B, W per chunk
  for (int c = 0; c < v; ++c) {
    const auto mean = [&](int k) { return counts[4 * c + k] > 0 ? seconds[4 * c + k] / counts[4 * c + k] : 0.0; };
    const double half_bw = mean(3) / 2;
    mine[3 * c] = mean(0);
    mine[3 * c + 1] = counts[4 * c + 1] > 0 ? mean(1) : half_bw;
    mine[3 * c + 2] = counts[4 * c + 2] > 0 ? mean(2) : half_bw;
  }
  const std::vector<double> all = comm::all_gather(pipeline, mine);
  schedule::CostModel costs;
  for (int s = 0; s < schedule.p * v; ++s) {
    const schedule::StagePlace place = schedule.placement.place(s);
    const double* c = &all[3 * (static_cast<std::size_t>(place.rank) * v + place.chunk)];
    costs.stages.push_back({c[0], c[1], c[2]});
  }
  return costs;
}

}  // namespace kpipe::runtime
