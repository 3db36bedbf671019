#include <fmt/format.h>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory"): two
// chunks per rank in a V, rank r holding model stages r and 2p-1-r, so the
// first and the last stage are both on rank 0 and the turn at stage p-1 -> p
// stays on rank p-1. Each rank may stash 2p (microbatch, chunk) activations,
// each half a pipeline stage: 1F1B's peak of p full-stage microbatches.
// Two planners, and the plan whose worst rank idles the smallest share of its
// span at the planning costs is kept (the list planner's on a tie): the list
// planner fills the warm-up with F's of both chunks and every gap with W's,
// which is exact at F = B = W and free messages; the V heuristic of Qi et al.
// plans at the real F, B, W and latency, which is where the list planner's
// W's start to hold up the gradient chain.
RankGenerator generator(const ScheduleSpec& spec) {
  const Placement placement = Placement::v_shape(spec.p);
  auto plan = zero_bubble_plan(spec, placement, std::vector<int>(static_cast<std::size_t>(spec.p), 2 * spec.p));
  // No plan idles less than not at all: the heuristic (several passes, most
  // of a large plan's generation time) runs only when the list plan idles.
  const double list_bubble = time_plan(plan, placement, spec.costs, spec.m).worst_span_bubble;
  if (list_bubble > 0.0) {
    auto planned = v_shape_plan(spec.p, spec.m, spec.costs);
    if (planned && time_plan(*planned, placement, spec.costs, spec.m).worst_span_bubble < list_bubble) {
      plan = std::move(*planned);
    }
  }
  return hand_out(std::move(plan));
}

std::optional<std::string> check(const ShapeCheck& shape) {
  if (shape.v != 2) {
    return fmt::format(
        "the zb-v schedule places two model chunks per rank in a V; set pipeline.virtual_stages = 2 "
        "(now {})",
        shape.describe_virtual_stages());
  }
  return std::nullopt;
}

// A V lets no stage wait on a rank that is idle at the turn, but the last
// rank still starts (p-1) forwards of a model stage late; the costs are those
// of one model stage (half a pipeline stage).
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& c) {
  return bubble_from_ratio((p - 1) * c.forward / (2.0 * m * (c.forward + c.backward_input + c.backward_weight)),
                           "(p-1)tF/(2m(tF+tB+tW))");
}

}  // namespace

const ScheduleInfo& zb_v_info() {
  static const ScheduleInfo info{
      "zb-v", "split backward over two chunks per rank in a V (Qi et al. ZB-V): near-zero bubble, 1F1B's memory",
      true,   generator,
      check,  v_placement,
      bubble};
  return info;
}

}  // namespace kpipe::schedule::detail
