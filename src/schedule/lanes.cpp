#include "kpipe/schedule/lanes.hpp"

namespace kpipe::schedule {

namespace {

// The end of the block that starts at `begin`: F, LOSS, then BW or B and W of
// one microbatch; `begin` itself where none starts there.
std::size_t block_end(const std::vector<Action>& actions, std::size_t begin) {
  const auto is = [&](std::size_t i, ActionKind kind) {
    return i < actions.size() && actions[i].kind == kind && actions[i].microbatch == actions[begin].microbatch;
  };
  if (!is(begin, ActionKind::forward) || !is(begin + 1, ActionKind::loss)) return begin;
  if (is(begin + 2, ActionKind::backward)) return begin + 3;
  if (is(begin + 2, ActionKind::backward_input) && is(begin + 3, ActionKind::backward_weight)) return begin + 4;
  return begin;
}

}  // namespace

std::vector<LaneGroup> lane_groups(const std::vector<Action>& actions, int lanes) {
  if (lanes < 2) return {};
  std::vector<LaneGroup> groups;
  std::size_t i = 0;
  for (std::size_t end = block_end(actions, i); end > i; i = end, end = block_end(actions, i)) {
    if (groups.empty() || groups.back().blocks.size() == static_cast<std::size_t>(lanes)) groups.push_back({i, i, {}});
    groups.back().blocks.push_back(i);
    groups.back().end = end;
  }
  for (; i < actions.size(); ++i) {
    if (actions[i].kind != ActionKind::reduce_grads && actions[i].kind != ActionKind::optimizer_step) return {};
  }
  return groups;
}

std::vector<Action> in_lane_order(const std::vector<Action>& actions, int lanes) {
  const std::vector<LaneGroup> groups = lane_groups(actions, lanes);
  if (groups.empty()) return {};
  std::vector<Action> order;
  order.reserve(actions.size() + actions.size() / 3);
  for (const LaneGroup& group : groups) {
    for (const std::size_t b : group.blocks) order.push_back(actions[b]);
    for (const std::size_t b : group.blocks) order.push_back(actions[b + 1]);
    for (const std::size_t b : group.blocks) {
      order.push_back(compute_action(ActionKind::backward_input, actions[b].microbatch, actions[b].chunk));
    }
    for (const std::size_t b : group.blocks) {
      order.push_back(compute_action(ActionKind::backward_weight, actions[b].microbatch, actions[b].chunk));
    }
  }
  order.insert(order.end(), actions.begin() + static_cast<std::ptrdiff_t>(groups.back().end), actions.end());
  return order;
}

}  // namespace kpipe::schedule
