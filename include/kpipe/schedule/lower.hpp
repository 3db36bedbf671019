#pragma once
// Lowering: turns a generated (compute-only) schedule into the one the
// executor runs, in passes over each rank. The boundary pass inserts, from
// the schedule's stage placement,
//   RECV_ACT  before an F whose previous model stage is on another rank,
//   SEND_ACT  after  an F whose next model stage is on another rank,
//   RECV_GRAD before a B/BW whose next model stage is on another rank,
//   SEND_GRAD after  a B/BW whose previous model stage is on another rank,
// and, for training, LOSS after the last model stage's F; the step pass adds
// REDUCE_GRADS, OPTIMIZER_STEP at the end of every rank of a training schedule. A receive marks where the rank
// waits for the message; the executor may post it earlier.

#include <cstdint>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

// True when the schedule already holds communication, LOSS or step actions.
bool is_lowered(const Schedule& schedule);

// Lowers `schedule` in place. When `origins` is given, (*origins)[r][i] is
// the index in the unlowered list of rank r of the compute action that lowered
// action i belongs to (-1 for the step actions), so problems found later can
// be traced back to what a user wrote.
void lower(Schedule& schedule, std::vector<std::vector<std::int32_t>>* origins = nullptr);

}  // namespace kpipe::schedule
