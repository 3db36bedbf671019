#pragma once
// What the schedule files share: their ScheduleInfo entry points (listed in
// registry.cpp) and the building blocks of their generators and checks.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/schedule/registry.hpp"

namespace kpipe::schedule::detail {

const ScheduleInfo& gpipe_info();
const ScheduleInfo& one_f_one_b_info();
const ScheduleInfo& interleaved_info();
const ScheduleInfo& zb_h1_info();
const ScheduleInfo& zb_h2_info();
const ScheduleInfo& zb_v_info();
const ScheduleInfo& v_half_info();
const ScheduleInfo& v_min_info();
const ScheduleInfo& dualpipe_v_info();
const ScheduleInfo& forward_only_info();

// A generator that computes each rank on its own from the spec.
template <void (*rank_actions)(const ScheduleSpec&, int, std::vector<Action>&)>
RankGenerator per_rank(const ScheduleSpec& spec) {
  return [spec](int rank, std::vector<Action>& out) { rank_actions(spec, rank, out); };
}

inline Placement looped_placement(int p, int v) { return Placement::looped(p, v); }
// The V of zb-v and dualpipe-v; a schedule file with another v is read with
// looped placement, and the schedule's check refuses it elsewhere.
inline Placement v_placement(int p, int v) { return v == 2 ? Placement::v_shape(p) : Placement::looped(p, v); }

// The check of schedules with one model chunk per rank.
std::optional<std::string> one_chunk_per_rank(const ShapeCheck& shape, std::string_view schedule);
// The advice when m < p: the smallest B that gives m = p.
std::string too_few_microbatches(std::string_view schedule, const ShapeCheck& shape);

// A bubble given as idle/useful, with the matching idle/total.
TheoreticalBubble bubble_from_ratio(double idle_over_useful, std::string formula);

// 1F1B's warm-up forwards on `rank`: min(p-r-1, m), plus spec.extra_warmup
// on every rank but the last (1f1b and zb-h1 share it).
int one_f_one_b_warmup(const ScheduleSpec& spec, int rank);

// Megatron's one-forward-one-backward order over `count` (virtual)
// microbatches: `warmup` forwards, then one forward and one backward in turn,
// then the remaining backwards. forward_at(k) and backward_at(k) are the k-th
// forward and backward action.
template <class ForwardAt, class BackwardAt>
void append_one_f_one_b(std::vector<Action>& out, int count, int warmup, ForwardAt forward_at, BackwardAt backward_at) {
  for (int k = 0; k < warmup; ++k) out.push_back(forward_at(k));
  for (int k = warmup; k < count; ++k) {
    out.push_back(forward_at(k));
    out.push_back(backward_at(k - warmup));
  }
  for (int k = count - warmup; k < count; ++k) out.push_back(backward_at(k));
}

// The split-backward planner behind zb-h2 and zb-v: plans every rank at
// once, with F = B = W = 1 and free messages, by list scheduling. A rank
// that is free runs, in this order of preference, the B it can start (the
// oldest microbatch; the gradient chain is the critical path), an F while it
// holds fewer than stash_limit[rank] stashed (microbatch, chunk) activations,
// or its oldest pending W; W's fill every gap. Per chunk, F's, B's and W's run
// in ascending microbatch order. A chunk holding an earlier model stage than
// another chunk of the same rank leaves one stash slot per later chunk free,
// so that a microbatch on its way through the rank's later stages never waits
// for memory (no deadlock). Returns each rank's compute actions.
std::vector<std::vector<Action>> zero_bubble_plan(const ScheduleSpec& spec, const Placement& placement,
                                                  std::vector<int> stash_limit);

// The cost-aware plan of a V (zb-v) at the exact F, B, W and latency of
// `costs` (v_shape_planner.cpp); nullopt when no variant of its heuristic
// places every action (small m), for the caller to keep another plan.
std::optional<std::vector<std::vector<Action>>> v_shape_plan(int p, int m, const PlanningCosts& costs);

// How a plan of compute actions runs when every action waits for its inputs
// and a message between ranks costs the latency: the worst rank's idle share
// of its own span (first compute to last, the zero-bubble papers' measure)
// and the makespan.
struct PlanTiming {
  double worst_span_bubble = 0.0;
  double makespan = 0.0;
};
PlanTiming time_plan(const std::vector<std::vector<Action>>& plan, const Placement& placement,
                     const PlanningCosts& costs, int m);

// Hands out each rank's list of a plan once, then releases it, so that
// generate_lowered() holds the compute form of at most the ranks not lowered yet.
RankGenerator hand_out(std::vector<std::vector<Action>> plan);

}  // namespace kpipe::schedule::detail
