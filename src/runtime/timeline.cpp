#include "kpipe/runtime/timeline.hpp"

#include <algorithm>

#include "kpipe/schedule/action.hpp"

namespace kpipe::runtime {

MeasuredBubble measure_bubble(const schedule::Schedule& schedule, int rank, const std::vector<ActionTiming>& timings,
                              MPI_Comm pipeline) {
  // LOSS runs inside the last stage's forward work (the simulator folds it into F).
  double local[2] = {0.0, 0.0};  // busy seconds, end of the last compute action
  for (const auto& t : timings) {
    const auto kind = schedule.ranks[rank][t.index].kind;
    if (!schedule::is_compute(kind) && kind != schedule::ActionKind::loss) continue;
    local[0] += t.end - t.start;
    local[1] = std::max(local[1], t.end);
  }
  double busy = 0.0, makespan = 0.0;
  MPI_Allreduce(&local[0], &busy, 1, MPI_DOUBLE, MPI_SUM, pipeline);
  MPI_Allreduce(&local[1], &makespan, 1, MPI_DOUBLE, MPI_MAX, pipeline);
  const double idle = schedule.p * makespan - busy;
  MeasuredBubble measured;
  measured.makespan = makespan;
  measured.bubble.idle_over_useful = busy > 0 ? idle / busy : 0.0;
  measured.bubble.idle_over_total = makespan > 0 ? idle / (schedule.p * makespan) : 0.0;
  return measured;
}

}  // namespace kpipe::runtime
