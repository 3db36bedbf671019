#include <algorithm>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// 1F1B: rank r runs min(p-r-1, m) warm-up forwards, so it never stashes more
// than p-r microbatches, against GPipe's m.
void one_f_one_b(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  const int warmup = std::min(spec.p - rank - 1, spec.m);
  append_one_f_one_b(
      out, spec.m, warmup, [](int k) { return compute_action(ActionKind::forward, k, 0); },
      [](int k) { return compute_action(ActionKind::backward, k, 0); });
}

constexpr char name[] = "1f1b";

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, name); }

std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& /*costs*/) {
  return bubble_from_ratio((p - 1.0) / m, "(p-1)/m");
}

}  // namespace

const ScheduleInfo& one_f_one_b_info() {
  static const ScheduleInfo info{
      name,  "one forward, one backward in turn (PipeDream-Flush); stashes at most p - r on rank r",
      true,  per_rank<one_f_one_b>,
      check, looped_placement,
      bubble};
  return info;
}

}  // namespace kpipe::schedule::detail
