#pragma once
// Lanes: a rank that holds the whole model (p = 1, one chunk) has no
// neighbour to wait for, so it may run several microbatches at once, each on
// a host thread of its own (model::Stage::forward_lanes). Its list then runs
// in groups of consecutive microbatch blocks, a block being one microbatch's
// F, LOSS and BW (or B and W), as 1F1B and ZB-H1 lay out a single rank: the
// group's F's at once, its losses one after the other, its B's at once, then
// each layer's W of every microbatch of the group in list order. No block
// reads what another computes, and every layer adds its weight gradients in
// the list's order, so the step's results are bitwise the list's.

#include <cstddef>
#include <vector>

#include "kpipe/schedule/action.hpp"

namespace kpipe::schedule {

struct LaneGroup {
  std::size_t begin = 0, end = 0;   // the actions [begin, end) of the list
  std::vector<std::size_t> blocks;  // where each microbatch's block starts, in list order
};

// The groups of up to `lanes` consecutive blocks of a rank's list that is
// made of blocks followed by step-level actions only (REDUCE_GRADS,
// OPTIMIZER_STEP), in list order; none where the list is not (another
// layout, messages, F&B, forward-only) or lanes < 2.
std::vector<LaneGroup> lane_groups(const std::vector<Action>& actions, int lanes);

// The list in the order lanes run it (for what it holds at once): each
// group's F's, LOSSes, B's and W's (a BW as its B and W), each in list order,
// then the rest; empty where lane_groups finds none (the list runs as it is,
// and a plan of millions of actions is not copied for nothing).
std::vector<Action> in_lane_order(const std::vector<Action>& actions, int lanes);

}  // namespace kpipe::schedule
