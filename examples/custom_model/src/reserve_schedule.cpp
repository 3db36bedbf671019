// "1f1b-reserve": 1F1B with one forward more in each rank's warm-up (p - r
// instead of p - r - 1, at most m). The extra stashed microbatch is a reserve:
// when a backward's gradient arrives late (a slow link, a busy neighbour),
// the rank runs that forward instead of idling, for one activation more of
// memory. Backwards stay in ascending microbatch order, so training is
// bitwise the sequential reference's, like every kpipe schedule.
#include "reserve_schedule.hpp"

#include <algorithm>
#include <string>

namespace custom {

namespace {

using namespace kpipe::schedule;

void reserve_1f1b(int p, int m, int rank, std::vector<Action>& out) {
  const int warmup = std::min(p - rank, m);
  for (int k = 0; k < warmup; ++k) out.push_back(compute_action(ActionKind::forward, k, 0));
  for (int k = warmup; k < m; ++k) {
    out.push_back(compute_action(ActionKind::forward, k, 0));
    out.push_back(compute_action(ActionKind::backward, k - warmup, 0));
  }
  for (int k = m - warmup; k < m; ++k) out.push_back(compute_action(ActionKind::backward, k, 0));
}

RankGenerator generator(const ScheduleSpec& spec) {
  return [p = spec.p, m = spec.m](int rank, std::vector<Action>& out) { reserve_1f1b(p, m, rank, out); };
}

std::optional<std::string> check(const ShapeCheck& shape) {
  if (shape.v == 1) return std::nullopt;
  return "the 1f1b-reserve schedule holds one model chunk per rank; set pipeline.virtual_stages = 1 (now " +
         shape.describe_virtual_stages() + ")";
}

Placement placement(int p, int v) { return Placement::looped(p, v); }

// As 1F1B: each rank idles p - 1 forward and backward slots while the pipeline fills and drains.
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& /*costs*/) {
  const double ratio = (p - 1.0) / m;
  return TheoreticalBubble{{ratio, ratio / (1.0 + ratio)}, "(p-1)/m"};
}

}  // namespace

const ScheduleInfo& reserve_schedule_info() {
  static const ScheduleInfo info{"1f1b-reserve", "1F1B with one forward in reserve per rank (examples/custom_model)",
                                 true,           generator,
                                 check,          placement,
                                 bubble};
  return info;
}

}  // namespace custom
