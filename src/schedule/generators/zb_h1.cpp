#include <algorithm>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's order with the
// backward split into B (input gradient) and W (weight gradient). B is what
// the previous stage waits for, W is not, so rank r defers its first r W's:
// the later ranks, which start the gradient chain, run their B's back to
// back, and the pending W's fill the gaps where 1F1B idles. Stashes (F to B)
// stay exactly 1F1B's; with F = B = W the bubble is a third of 1F1B's for m >= p.
// spec.extra_warmup deepens the warm-up as in 1F1B (one_f_one_b.cpp).
void zb_h1(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  std::vector<Action> order;
  order.reserve(2 * static_cast<std::size_t>(spec.m));
  append_one_f_one_b(
      order, spec.m, one_f_one_b_warmup(spec, rank), [](int k) { return compute_action(ActionKind::forward, k, 0); },
      [](int k) { return compute_action(ActionKind::backward_input, k, 0); });

  int backwards = 0;
  int next_weight = 0;  // W's run in ascending microbatch order (DESIGN.md §3)
  for (const Action& action : order) {
    out.push_back(action);
    if (action.kind == ActionKind::backward_input && backwards++ >= rank) {
      out.push_back(compute_action(ActionKind::backward_weight, next_weight++, 0));
    }
  }
  while (next_weight < spec.m) out.push_back(compute_action(ActionKind::backward_weight, next_weight++, 0));
}

std::optional<std::string> check(const ShapeCheck& shape) { return one_chunk_per_rank(shape, "zb-h1"); }

// W's fill the drain, leaving (p-1)(tF + tB - tW) idle per rank (Qi et al.; for m >= p).
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& c) {
  const double f = c.forward, b = c.backward_input, w = c.backward_weight;
  return bubble_from_ratio((p - 1) * std::max(f + b - w, 0.0) / (m * (f + b + w)), "(p-1)(tF+tB-tW)/(m(tF+tB+tW))");
}

}  // namespace

const ScheduleInfo& zb_h1_info() {
  static const ScheduleInfo info{
      "zb-h1", "1F1B with split backward, W's deferred into the bubbles (Qi et al. ZB-H1); 1F1B's memory",
      true,    per_rank<zb_h1>,
      check,   looped_placement,
      bubble,  nullptr,
      true};
  return info;
}

}  // namespace kpipe::schedule::detail
