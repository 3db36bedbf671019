#include "kpipe/schedule/lower.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "lowering.hpp"

namespace kpipe::schedule {

namespace {

// The lowered list of one rank as the passes build it, with the origin of
// every action when the caller wants them.
class RankOutput {
 public:
  RankOutput(std::size_t compute, std::vector<std::int32_t>* origins) : origins_(origins) {
    // A receive before and a send or LOSS after most actions (none around a
    // W, two of each around an F&B), plus two step actions.
    actions_.reserve(3 * compute + 2);
    if (origins_) origins_->reserve(3 * compute + 2);
  }
  void add(const Action& action, std::int32_t origin) {
    actions_.push_back(action);
    if (origins_) origins_->push_back(origin);
  }
  std::vector<Action> take() { return std::move(actions_); }

 private:
  std::vector<Action> actions_;
  std::vector<std::int32_t>* origins_;
};

struct PassInput {
  const Schedule& shape;
  int rank;
  const std::vector<Action>& compute;
  bool training;
};

// A message with the neighbouring stage at `other`; the tag names the sending chunk.
Action message(const Schedule& shape, ActionKind kind, const Action& at, StagePlace other, bool sending) {
  const Direction direction = direction_of(kind);
  return message_action(kind, at.microbatch, at.chunk, other.rank,
                        message_tag(at.microbatch, sending ? at.chunk : other.chunk, shape.v, direction));
}

// Stage boundaries, from the placement: the messages to and from neighbouring
// stages on other ranks (none where the neighbour is on this rank, as at the
// turn of ZB-V's V), and LOSS after the last stage's F.
void boundary_pass(const PassInput& in, RankOutput& out) {
  const Placement& placement = in.shape.placement;
  const int last = placement.stage_count() - 1;
  for (std::size_t i = 0; i < in.compute.size(); ++i) {
    const Action& a = in.compute[i];
    const auto origin = static_cast<std::int32_t>(i);
    const int stage = placement.stage(in.rank, a.chunk);
    const StagePlace previous = stage > 0 ? placement.place(stage - 1) : StagePlace{in.rank, -1};
    const StagePlace next = stage < last ? placement.place(stage + 1) : StagePlace{in.rank, -1};
    const bool previous_elsewhere = previous.rank != in.rank;
    const bool next_elsewhere = next.rank != in.rank;
    switch (a.kind) {
      case ActionKind::forward:
        if (previous_elsewhere) out.add(message(in.shape, ActionKind::recv_act, a, previous, false), origin);
        out.add(a, origin);
        if (stage == last && in.training) out.add(compute_action(ActionKind::loss, a.microbatch, a.chunk), origin);
        if (next_elsewhere) out.add(message(in.shape, ActionKind::send_act, a, next, true), origin);
        break;
      case ActionKind::backward_input:
      case ActionKind::backward:
        if (next_elsewhere) out.add(message(in.shape, ActionKind::recv_grad, a, next, false), origin);
        out.add(a, origin);
        if (previous_elsewhere) out.add(message(in.shape, ActionKind::send_grad, a, previous, true), origin);
        break;
      case ActionKind::forward_backward: {
        // Both halves' inputs before, both outputs after: the halves run at once.
        const Action halves[] = {forward_half(a), backward_half(a)};
        const auto neighbour = [&](const Action& half, int step) {
          const int other = placement.stage(in.rank, half.chunk) + step;
          return other >= 0 && other <= last ? placement.place(other) : StagePlace{in.rank, -1};
        };
        const StagePlace before = neighbour(halves[0], -1), after = neighbour(halves[1], +1);
        if (before.rank != in.rank) out.add(message(in.shape, ActionKind::recv_act, halves[0], before, false), origin);
        if (after.rank != in.rank) out.add(message(in.shape, ActionKind::recv_grad, halves[1], after, false), origin);
        out.add(a, origin);
        if (placement.stage(in.rank, halves[0].chunk) == last) {
          out.add(compute_action(ActionKind::loss, halves[0].microbatch, halves[0].chunk), origin);
        }
        const StagePlace to_next = neighbour(halves[0], +1), to_previous = neighbour(halves[1], -1);
        if (to_next.rank != in.rank) out.add(message(in.shape, ActionKind::send_act, halves[0], to_next, true), origin);
        if (to_previous.rank != in.rank) {
          out.add(message(in.shape, ActionKind::send_grad, halves[1], to_previous, true), origin);
        }
        break;
      }
      default:
        out.add(a, origin);
    }
  }
}

// The end of a training step on every rank: the data-parallel gradient
// reduction, then the weight update.
void step_pass(const PassInput& in, RankOutput& out) {
  if (!in.training) return;
  out.add(step_action(ActionKind::reduce_grads), -1);
  out.add(step_action(ActionKind::optimizer_step), -1);
}

// In order; each appends to what the ones before it wrote.
constexpr void (*passes[])(const PassInput&, RankOutput&) = {boundary_pass, step_pass};

}  // namespace

namespace detail {

std::vector<Action> lower_rank(const Schedule& shape, int rank, const std::vector<Action>& compute, bool training,
                               std::vector<std::int32_t>* origins) {
  RankOutput out(compute.size(), origins);
  const PassInput in{shape, rank, compute, training};
  for (const auto pass : passes) pass(in, out);
  return out.take();
}

}  // namespace detail

bool is_lowered(const Schedule& schedule) {
  return std::any_of(schedule.ranks.begin(), schedule.ranks.end(), [](const std::vector<Action>& actions) {
    return std::any_of(actions.begin(), actions.end(), [](const Action& a) { return !is_compute(a.kind); });
  });
}

void lower(Schedule& schedule, std::vector<std::vector<std::int32_t>>* origins) {
  if (is_lowered(schedule)) {
    throw runtime_error(
        fmt::format("the {} schedule is already lowered; lower() takes compute actions only", schedule.name));
  }
  const bool training = schedule.training();
  if (origins) origins->assign(schedule.ranks.size(), {});
  for (int rank = 0; rank < static_cast<int>(schedule.ranks.size()); ++rank) {
    schedule.ranks[rank] =
        detail::lower_rank(schedule, rank, schedule.ranks[rank], training, origins ? &(*origins)[rank] : nullptr);
  }
}

}  // namespace kpipe::schedule
