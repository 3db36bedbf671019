#include "kpipe/schedule/generate.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "lowering.hpp"

namespace kpipe::schedule {

namespace {

// The limits of every schedule, then the schedule's own constraints, unless
// the spec comes resolved (its shape checked where it was resolved).
const ScheduleInfo& checked(const ScheduleSpec& spec) {
  const ScheduleInfo& info = spec.entry ? *spec.entry : find_schedule(spec.name);
  if (spec.p < 1 || spec.v < 1 || spec.m < 1) {
    throw input_error(
        fmt::format("a schedule needs p, v and m >= 1, but p = {}, v = {}, m = {}", spec.p, spec.v, spec.m));
  }
  if (!spec.entry) check_shape(spec);
  const double actions = limits::actions_per_microbatch_and_chunk * spec.p * spec.v * spec.m;
  if (spec.v > max_chunks || spec.p > max_ranks) {
    throw input_error(fmt::format("p = {}, v = {}: a schedule holds at most {} ranks and {} chunks per rank", spec.p,
                                  spec.v, max_ranks, max_chunks));
  }
  if (actions > limits::plan_actions) {
    throw input_error(
        fmt::format("p = {}, v = {}, m = {} make a plan of about {:.0f} million actions; kpipe plans "
                    "at most {:.0f} million (p·v·m <= {:.0f} million)",
                    spec.p, spec.v, spec.m, actions / 1e6, limits::plan_actions / 1e6,
                    limits::plan_actions / limits::actions_per_microbatch_and_chunk / 1e6));
  }
  return info;
}

Schedule empty_schedule(const ScheduleSpec& spec, const ScheduleInfo& info) {
  Schedule schedule{spec.name, spec.p, spec.v, spec.m, {}, info.placement(spec.p, spec.v), &info};
  schedule.ranks.reserve(static_cast<std::size_t>(spec.p));
  return schedule;
}

}  // namespace

Schedule generate(const ScheduleSpec& spec) {
  const ScheduleInfo& info = checked(spec);
  Schedule schedule = empty_schedule(spec, info);
  const RankGenerator rank_actions = info.generator(spec);
  for (int rank = 0; rank < spec.p; ++rank) rank_actions(rank, schedule.ranks.emplace_back());
  return schedule;
}

Schedule generate_lowered(const ScheduleSpec& spec) {
  const ScheduleInfo& info = checked(spec);
  Schedule schedule = empty_schedule(spec, info);
  const RankGenerator rank_actions = info.generator(spec);
  std::vector<Action> compute;  // reused: only the lowered lists take new memory
  for (int rank = 0; rank < spec.p; ++rank) {
    compute.clear();
    rank_actions(rank, compute);
    schedule.ranks.push_back(detail::lower_rank(schedule, rank, compute, info.trains, nullptr));
  }
  return schedule;
}

Schedule forward_schedule(const Schedule& training, int m) {
  Schedule schedule{"forward", training.p, training.v, m, {}, training.placement};
  std::vector<Action> compute;
  for (int rank = 0; rank < schedule.p; ++rank) {
    compute.clear();
    for (int j = 0; j < m; ++j) {
      for (int stage = 0; stage < schedule.placement.stage_count(); ++stage) {
        const StagePlace place = schedule.placement.place(stage);
        if (place.rank == rank) compute.push_back(compute_action(ActionKind::forward, j, place.chunk));
      }
    }
    schedule.ranks.push_back(detail::lower_rank(schedule, rank, compute, false, nullptr));
  }
  return schedule;
}

}  // namespace kpipe::schedule
