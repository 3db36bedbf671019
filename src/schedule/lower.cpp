#include "kpipe/schedule/lower.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "lowering.hpp"

namespace kpipe::schedule {

namespace {

// The lowered list of one rank as the passes build it, with the origin of
// every action when the caller wants them; or, counting, only how long the
// list will be, so that it is allocated once at its size (plans of millions
// of actions keep no spare capacity).
class RankOutput {
 public:
  static RankOutput counting() { return RankOutput(); }
  RankOutput(std::size_t size, std::vector<std::int32_t>* origins) : origins_(origins), counting_(false) {
    actions_.reserve(size);
    if (origins_) origins_->reserve(size);
  }
  void add(const Action& action, std::int32_t origin) {
    ++size_;
    if (counting_) return;
    actions_.push_back(action);
    if (origins_) origins_->push_back(origin);
  }
  std::size_t size() const { return size_; }
  std::vector<Action> take() { return std::move(actions_); }

 private:
  RankOutput() = default;
  std::vector<Action> actions_;
  std::vector<std::int32_t>* origins_ = nullptr;
  bool counting_ = true;
  std::size_t size_ = 0;
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
// turn of ZB-V's V), and LOSS after the last stage's F. An F&B's halves run at
// once: both receive before it and both send after it.
void boundary_pass(const PassInput& in, RankOutput& out) {
  const Placement& placement = in.shape.placement;
  const int last = placement.stage_count() - 1;
  std::int32_t origin = 0;
  // The model stage `step` away from `part`'s, or this rank (chunk -1) past either end.
  const auto neighbour = [&](const Action& part, int step) {
    const int other = placement.stage(in.rank, part.chunk) + step;
    return other >= 0 && other <= last ? placement.place(other) : StagePlace{in.rank, -1};
  };
  // What a compute part waits for: an F its activation, a B or BW its output gradient.
  const auto receive = [&](const Action& part) {
    if (part.kind != ActionKind::forward && !releases_stash(part.kind)) return;
    const bool forward = part.kind == ActionKind::forward;
    const StagePlace from = neighbour(part, forward ? -1 : +1);
    if (from.rank == in.rank) return;
    out.add(message(in.shape, forward ? ActionKind::recv_act : ActionKind::recv_grad, part, from, false), origin);
  };
  // What follows it: LOSS after the last stage's F, then what it hands on.
  const auto send = [&](const Action& part) {
    if (part.kind != ActionKind::forward && !releases_stash(part.kind)) return;
    const bool forward = part.kind == ActionKind::forward;
    if (forward && in.training && placement.stage(in.rank, part.chunk) == last) {
      out.add(compute_action(ActionKind::loss, part.microbatch, part.chunk), origin);
    }
    const StagePlace to = neighbour(part, forward ? +1 : -1);
    if (to.rank == in.rank) return;
    out.add(message(in.shape, forward ? ActionKind::send_act : ActionKind::send_grad, part, to, true), origin);
  };
  for (std::size_t i = 0; i < in.compute.size(); ++i) {
    const Action& a = in.compute[i];
    origin = static_cast<std::int32_t>(i);
    for_each_part(a, receive);
    out.add(a, origin);
    for_each_part(a, send);
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
  const PassInput in{shape, rank, compute, training};
  RankOutput count = RankOutput::counting();
  for (const auto pass : passes) pass(in, count);
  RankOutput out(count.size(), origins);
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
