#include <algorithm>

#include "generators.hpp"

namespace kpipe::schedule::detail {

// 1F1B: rank r runs min(p-r-1, m) warm-up forwards, so it never stashes more
// than p-r microbatches, against GPipe's m.
void one_f_one_b(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  const int warmup = std::min(spec.p - rank - 1, spec.m);
  append_one_f_one_b(
      out, spec.m, warmup, [](int k) { return compute_action(ActionKind::forward, k, 0); },
      [](int k) { return compute_action(ActionKind::backward, k, 0); });
}

}  // namespace kpipe::schedule::detail
