#include <algorithm>
#include <cstdint>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// 1F1B: rank r runs min(p-r-1, m) warm-up forwards, so it never stashes more
// than p-r microbatches, against GPipe's m. Each of spec.extra_warmup more
// forwards on the ranks before the last stashes one more microbatch and gives
// the rank a forward to run while the gradient it waits for is late, where
// plain 1F1B's neighbours stall each other at every late message.
void one_f_one_b(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  append_one_f_one_b(
      out, spec.m, one_f_one_b_warmup(spec, rank), [](int k) { return compute_action(ActionKind::forward, k, 0); },
      [](int k) { return compute_action(ActionKind::backward, k, 0); });
}

constexpr char name[] = "1f1b";

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, name); }

std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& /*costs*/) {
  return bubble_from_ratio((p - 1.0) / m, "(p-1)/m");
}

}  // namespace

int one_f_one_b_warmup(const ScheduleSpec& spec, int rank) {
  const int extra = rank + 1 < spec.p ? spec.extra_warmup : 0;
  return static_cast<int>(std::min<std::int64_t>(std::int64_t{spec.p} - rank - 1 + extra, spec.m));
}

const ScheduleInfo& one_f_one_b_info() {
  static const ScheduleInfo info{name,
                                 "one forward, one backward in turn (PipeDream-Flush); stashes at most p - r on rank r "
                                 "(plus pipeline.extra_warmup on all but the last)",
                                 true,
                                 per_rank<one_f_one_b>,
                                 check,
                                 looped_placement,
                                 bubble,
                                 nullptr,
                                 true};
  return info;
}

}  // namespace kpipe::schedule::detail
