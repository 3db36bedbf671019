#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", §3): rank r stashes up
// to 2(p-r)-1 microbatches instead of 1F1B's p-r, so its warm-up forwards
// reach until the first gradient arrives and nobody waits for it; then B's
// as they arrive, F's as memory frees, and the W's fill everything else, the
// last rank deferring its W's to the end so that the gradient chain runs at
// the speed of F and B. Each rank then works without a gap from its first F
// to its last W: the paper's parallelogram. Peak stash: about twice 1F1B's.
RankGenerator generator(const ScheduleSpec& spec) {
  std::vector<int> stash_limit(static_cast<std::size_t>(spec.p));
  for (int r = 0; r < spec.p; ++r) stash_limit[static_cast<std::size_t>(r)] = 2 * (spec.p - r) - 1;
  return hand_out(zero_bubble_plan(spec, Placement::looped(spec.p, 1), std::move(stash_limit)));
}

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, "zb-h2"); }

// Qi et al. count ZB-H2's bubble as zero: the parallelogram's ragged ends
// interlock with the previous and the next step once the optimizer's
// synchronisation is dropped. kpipe's step ends at the optimizer, so rank r
// still waits r forwards at the start and p-1-r at the end: (p-1) tF per rank.
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& c) {
  return bubble_from_ratio((p - 1) * c.forward / (m * (c.forward + c.backward_input + c.backward_weight)),
                           "(p-1)tF/(m(tF+tB+tW))");
}

}  // namespace

const ScheduleInfo& zb_h2_info() {
  static const ScheduleInfo info{
      "zb-h2",
      "split backward, 2(p-r)-1 warm-up forwards: no gap between a rank's first F and last W (Qi et al. ZB-H2)",
      true,
      generator,
      check,
      looped_placement,
      bubble};
  return info;
}

}  // namespace kpipe::schedule::detail
