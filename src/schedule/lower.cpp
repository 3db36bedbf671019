#include "kpipe/schedule/lower.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "lowering.hpp"

namespace kpipe::schedule {

namespace {

class RankLowering {
 public:
  RankLowering(const Schedule& shape, int rank, std::size_t compute, bool training, std::vector<std::int32_t>* origins)
      : p_(shape.p),
        v_(shape.v),
        last_stage_(shape.p * shape.v - 1),
        rank_(rank),
        training_(training),
        origins_(origins) {
    // At most a receive before and a send or LOSS after each action, plus two step actions.
    out_.reserve(3 * compute + 2);
    if (origins_) origins_->reserve(3 * compute + 2);
  }

  std::vector<Action> run(const std::vector<Action>& compute) {
    for (std::size_t i = 0; i < compute.size(); ++i) lower_action(compute[i], static_cast<std::int32_t>(i));
    if (training_) {
      add(step_action(ActionKind::reduce_grads), -1);
      add(step_action(ActionKind::optimizer_step), -1);
    }
    return std::move(out_);
  }

 private:
  void add(const Action& action, std::int32_t origin) {
    out_.push_back(action);
    if (origins_) origins_->push_back(origin);
  }
  // A message with the neighbouring stage at `other`; the tag names the sending chunk.
  Action message(ActionKind kind, const Action& at, StagePlace other, bool sending) const {
    const Direction direction =
        (kind == ActionKind::send_act || kind == ActionKind::recv_act) ? Direction::activation : Direction::gradient;
    return message_action(kind, at.microbatch, at.chunk, other.rank,
                          message_tag(at.microbatch, sending ? at.chunk : other.chunk, v_, direction));
  }

  void lower_action(const Action& a, std::int32_t origin) {
    const int stage = model_stage(rank_, a.chunk, p_);
    const StagePlace previous = previous_stage(rank_, a.chunk, p_);
    const StagePlace next = next_stage(rank_, a.chunk, p_);
    const bool receive_from_previous = stage > 0 && previous.rank != rank_;
    const bool send_to_next = stage < last_stage_ && next.rank != rank_;
    switch (a.kind) {
      case ActionKind::forward:
        if (receive_from_previous) add(message(ActionKind::recv_act, a, previous, false), origin);
        add(a, origin);
        if (stage == last_stage_ && training_) add(compute_action(ActionKind::loss, a.microbatch, a.chunk), origin);
        if (send_to_next) add(message(ActionKind::send_act, a, next, true), origin);
        break;
      case ActionKind::backward_input:
      case ActionKind::backward:
        if (send_to_next) add(message(ActionKind::recv_grad, a, next, false), origin);
        add(a, origin);
        if (receive_from_previous) add(message(ActionKind::send_grad, a, previous, true), origin);
        break;
      default: add(a, origin);
    }
  }

  int p_;
  int v_;
  int last_stage_;
  int rank_;
  bool training_;
  std::vector<std::int32_t>* origins_;
  std::vector<Action> out_;
};

}  // namespace

namespace detail {

std::vector<Action> lower_rank(const Schedule& shape, int rank, const std::vector<Action>& compute, bool training,
                               std::vector<std::int32_t>* origins) {
  return RankLowering(shape, rank, compute.size(), training, origins).run(compute);
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
