#include "kpipe/schedule/action.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace kpipe::schedule {

namespace {

constexpr std::array<std::string_view, action_kind_count> kind_names = {
    "F",         "B",         "W",    "BW",           "SEND_ACT",       "RECV_ACT",
    "SEND_GRAD", "RECV_GRAD", "LOSS", "REDUCE_GRADS", "OPTIMIZER_STEP", "F&B",
};

}  // namespace

std::string_view name(ActionKind kind) { return kind_names[static_cast<std::size_t>(kind)]; }

std::optional<ActionKind> parse_kind(std::string_view text) {
  for (std::size_t k = 0; k < kind_names.size(); ++k) {
    if (kind_names[k] == text) return static_cast<ActionKind>(k);
  }
  return std::nullopt;
}

std::string describe(const Action& action) {
  if (is_step_level(action.kind)) return std::string(name(action.kind));
  if (is_communication(action.kind)) {
    return fmt::format("{} mb={} chunk={} peer={} tag={}", name(action.kind), action.microbatch, action.chunk,
                       action.peer, action.tag);
  }
  if (action.kind == ActionKind::forward_backward) {
    return fmt::format("F&B mb={} chunk={} bw_mb={} bw_chunk={}", action.microbatch, action.chunk, action.tag,
                       action.peer);
  }
  return fmt::format("{} mb={} chunk={}", name(action.kind), action.microbatch, action.chunk);
}

StashPeak peak_stash(const std::vector<Action>& actions, int limit) {
  StashPeak result{0, actions.size()};
  int stashed = 0;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    for_each_part(actions[i], [&](const Action& part) {
      if (part.kind == ActionKind::forward) {
        result.peak = std::max(result.peak, ++stashed);
        if (limit > 0 && stashed > limit && result.first_over_limit == actions.size()) result.first_over_limit = i;
      } else if (releases_stash(part.kind)) {
        --stashed;
      }
    });
  }
  return result;
}

int peak_held(const std::vector<Action>& actions) {
  int held = 0, peak = 0;
  for (const Action& action : actions) {
    for_each_part(action, [&](const Action& part) {
      if (part.kind == ActionKind::forward) peak = std::max(peak, ++held);
      if (part.kind == ActionKind::backward_weight || part.kind == ActionKind::backward) --held;
    });
  }
  return peak;
}

}  // namespace kpipe::schedule
