#pragma once
// The schedule IR (DESIGN.md §2): for every pipeline rank an ordered list of
// actions, plus the stage placement every consumer agrees on (placement.hpp).

#include <cstddef>
#include <string>
#include <vector>

#include "kpipe/schedule/action.hpp"
#include "kpipe/schedule/placement.hpp"

namespace kpipe::schedule {

struct ScheduleInfo;  // registry.hpp

// The costs a cost-aware generator (zb-v) plans with: one model stage's F, B
// and W, and the latency of a message between ranks, in the units of
// sim.cost_*. Unit costs and free messages unless the deck says otherwise.
struct PlanningCosts {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  double latency = 0.0;
};

// What to generate: a schedule name (see schedule_names()) and its shape.
struct ScheduleSpec {
  std::string name;
  int p = 1;  // pipeline ranks
  int v = 1;  // model chunks per rank
  int m = 1;  // microbatches per step
  // The registry entry of `name` when a run resolved it (config::run_config
  // looks it up and checks the shape once); null: generation looks `name` up
  // and checks the shape itself.
  const ScheduleInfo* entry = nullptr;
  PlanningCosts costs{};
  // Forwards beyond the warm-up on every rank but the last, for schedules
  // whose ScheduleInfo::takes_extra_warmup (pipeline.extra_warmup).
  int extra_warmup = 0;
};

struct Schedule {
  std::string name;
  int p = 1;
  int v = 1;
  int m = 1;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions in execution order
  Placement placement;                     // which model stage each (rank, chunk) holds; p and v agree
  const ScheduleInfo* entry = nullptr;     // the registry entry it was generated from; null for a schedule file

  std::size_t action_count() const;
  // True when any rank runs a backward pass; a forward-only schedule is for inference.
  bool training() const;
};

// Message tags are unique per (microbatch, sending chunk, direction), so the
// executor can post every receive early and match it unambiguously:
// tag = 2·(microbatch·v + sending chunk) + direction.
constexpr int message_tag(int microbatch, int sending_chunk, int v, Direction direction) {
  return 2 * (microbatch * v + sending_chunk) + static_cast<int>(direction);
}

}  // namespace kpipe::schedule
