#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "generators.hpp"
#include "kpipe/schedule/generate.hpp"

namespace kpipe::schedule {

int interleaved_group_size(int m, int p) {
  for (int g = p; g < m; ++g) {
    if (m % g == 0 || m % g >= p) return g;
  }
  return m;
}

namespace detail {

namespace {

// Megatron's order of virtual microbatches as (microbatch, chunk): groups of g
// microbatches, each group through chunk 0, then chunk 1, ...; the last group
// takes what remains. Backward passes walk it with the chunks reversed.
std::vector<std::pair<int, int>> virtual_order(int m, int v, int g) {
  std::vector<std::pair<int, int>> order;
  order.reserve(static_cast<std::size_t>(m) * v);
  for (int lo = 0; lo < m; lo += g) {
    const int hi = std::min(lo + g, m);
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int microbatch = lo; microbatch < hi; ++microbatch) order.emplace_back(microbatch, chunk);
    }
  }
  return order;
}

// Interleaved 1F1B (Narayanan et al., Megatron's virtual pipeline). Rank r
// holds chunks 0..v-1 (model stages r, r+p, ...). Its warm-up is Megatron's
// 2·(p-r-1) + (v-1)·g forwards: long enough that the first backward of the
// last chunk finds its gradient ready.
void interleaved(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  const int count = spec.m * spec.v;
  const int g = interleaved_group_size(spec.m, spec.p);
  const int warmup = std::min(2 * (spec.p - rank - 1) + (spec.v - 1) * g, count);
  const auto order = virtual_order(spec.m, spec.v, g);
  append_one_f_one_b(
      out, count, warmup, [&](int k) { return compute_action(ActionKind::forward, order[k].first, order[k].second); },
      [&](int k) { return compute_action(ActionKind::backward, order[k].first, spec.v - 1 - order[k].second); });
}

std::optional<std::string> check(const ShapeCheck& shape) {
  if (shape.v < 2) {
    return fmt::format("the interleaved schedule needs pipeline.virtual_stages >= 2 model chunks per rank, but {}",
                       shape.describe_virtual_stages());
  }
  if (shape.m < shape.p) return too_few_microbatches("interleaved", shape);
  return std::nullopt;
}

// DESIGN.md §1: v chunks per rank cut the fill and drain to 1/v.
std::optional<TheoreticalBubble> bubble(int p, int v, int m, const StageCosts& /*costs*/) {
  return bubble_from_ratio((p - 1.0) / (static_cast<double>(v) * m), "(p-1)/(v*m)");
}

}  // namespace

const ScheduleInfo& interleaved_info() {
  static const ScheduleInfo info{
      "interleaved", "Megatron's virtual pipeline: v >= 2 chunks per rank, rank r holds stages r, r+p, ...",
      true,          per_rank<interleaved>,
      check,         looped_placement,
      bubble};
  return info;
}

}  // namespace detail
}  // namespace kpipe::schedule
