#include "kpipe/schedule/validate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "simulation/execution.hpp"

namespace kpipe::schedule {

namespace {

constexpr std::int32_t absent = -1;
// Every kind but the two step-level ones is keyed by (microbatch, chunk).
constexpr int keyed_kinds = static_cast<int>(ActionKind::loss) + 1;

// What an action needs, described only when it is missing.
struct Need {
  ActionKind kind;
  int microbatch;
  int chunk;
  bool any_backward;  // BW or B, whichever the rank has

  bool matches(const Action& a) const {
    bool found = false;
    for_each_part(a, [&](const Action& part) {
      found = found || ((any_backward ? releases_stash(part.kind) : part.kind == kind) &&
                        part.microbatch == microbatch && part.chunk == chunk);
    });
    return found;
  }
  std::string describe() const {
    return any_backward ? fmt::format("the backward (BW or B) mb={} chunk={}", microbatch, chunk)
                        : fmt::format("{} mb={} chunk={}", name(kind), microbatch, chunk);
  }
};

// The per-rank rules: fields, uniqueness, local dependencies, weight-gradient
// order, completeness. One pass in list order marks what the rank has done;
// an action's dependencies must be marked by the time it is reached. The
// marks are one byte per (kind, chunk, microbatch), reused across ranks, so a
// check is O(actions + m·v) per rank and stays in cache; positions for
// messages are searched for only once something is wrong.
class RankCheck {
 public:
  RankCheck(const Schedule& schedule, bool training)
      : s_(schedule),
        training_(training),
        slots_(static_cast<std::size_t>(schedule.m) * schedule.v),
        done_(keyed_kinds * slots_),
        last_weight_(schedule.v) {}

  std::optional<Problem> check(int rank) {
    rank_ = rank;
    actions_ = &s_.ranks[rank];
    std::fill(done_.begin(), done_.end(), std::uint8_t{0});
    std::fill(last_weight_.begin(), last_weight_.end(), std::pair<int, std::int32_t>{-1, absent});
    reduce_ = optimizer_ = last_compute_ = absent;
    problem_.reset();
    if (walk()) check_complete();
    return std::move(problem_);
  }

 private:
  std::uint8_t& done(ActionKind kind, int microbatch, int chunk) {
    return done_[static_cast<std::size_t>(kind) * slots_ + static_cast<std::size_t>(chunk) * s_.m + microbatch];
  }
  bool done(const Need& what) {
    return what.any_backward ? done(ActionKind::backward, what.microbatch, what.chunk) ||
                                   done(ActionKind::backward_input, what.microbatch, what.chunk)
                             : done(what.kind, what.microbatch, what.chunk);
  }
  // Where `what` is in this rank's list, searching from `from`; absent if nowhere.
  std::int32_t find(const Need& what, std::size_t from = 0) const {
    for (std::size_t i = from; i < actions_->size(); ++i) {
      if (what.matches((*actions_)[i])) return static_cast<std::int32_t>(i);
    }
    return absent;
  }
  // The checks return false after recording the problem.
  bool fail_at(std::size_t i, const std::string& what) {
    problem_ = Problem{rank_, static_cast<std::int64_t>(i),
                       fmt::format("rank {}, action {} ({}): {}", rank_, i, describe((*actions_)[i]), what)};
    return false;
  }
  bool fail_on_rank(const std::string& what) {
    problem_ = Problem{rank_, -1, fmt::format("rank {}: {}", rank_, what)};
    return false;
  }

  bool walk();
  bool check_overlapped(std::size_t i, const Action& a);
  bool check_against_done(std::size_t i, const Action& a, const std::string& which);
  bool check_fields(std::size_t i, const Action& a);
  bool check_message(std::size_t i, const Action& a);
  bool check_dependencies(std::size_t i, const Action& a);
  bool need(std::size_t i, const Need& what);
  bool check_weight_order(std::size_t i, const Action& a);
  bool check_complete();
  bool check_step_actions();

  const Schedule& s_;
  bool training_;
  std::size_t slots_;
  std::vector<std::uint8_t> done_;
  std::vector<std::pair<int, std::int32_t>> last_weight_;  // per chunk: (microbatch, position) of the last W/BW
  int rank_ = 0;
  const std::vector<Action>* actions_ = nullptr;
  std::int32_t reduce_ = absent;
  std::int32_t optimizer_ = absent;
  std::int32_t last_compute_ = absent;
  std::optional<Problem> problem_;
};

bool RankCheck::walk() {
  for (std::size_t i = 0; i < actions_->size(); ++i) {
    const Action& a = (*actions_)[i];
    if (!check_fields(i, a)) return false;
    if (is_step_level(a.kind)) {
      std::int32_t& at_step = a.kind == ActionKind::reduce_grads ? reduce_ : optimizer_;
      if (at_step != absent) return fail_at(i, fmt::format("appears twice (also action {})", at_step));
      at_step = static_cast<std::int32_t>(i);
      continue;
    }
    if (a.kind == ActionKind::forward_backward) {
      if (!check_overlapped(i, a)) return false;
      continue;
    }
    if (!check_against_done(i, a, "")) return false;
    done(a.kind, a.microbatch, a.chunk) = 1;
    if (is_compute(a.kind)) last_compute_ = static_cast<std::int32_t>(i);
  }
  return true;
}

// An F&B's halves run at the same time: each is checked as the action it
// stands for, and neither may need the other.
bool RankCheck::check_overlapped(std::size_t i, const Action& a) {
  if (a.peer < 0 || a.peer >= s_.v) {
    return fail_at(i, fmt::format("bw_chunk {} is out of range 0..{} (v = {})", a.peer, s_.v - 1, s_.v));
  }
  const Action halves[] = {forward_half(a), backward_half(a)};
  for (const Action& half : halves) {
    if (!check_fields(i, half)) return false;
  }
  if (halves[0].microbatch == halves[1].microbatch && halves[0].chunk == halves[1].chunk) {
    return fail_at(i, "its BW needs its own F, but the halves of an F&B run at once; put the F in an earlier action");
  }
  // Both halves against what ran before the F&B, neither against the other.
  for (const Action& half : halves) {
    if (!check_against_done(i, half, fmt::format("its {} ", describe(half)))) return false;
  }
  for (const Action& half : halves) done(half.kind, half.microbatch, half.chunk) = 1;
  last_compute_ = static_cast<std::int32_t>(i);
  return true;
}

// An action (or half of an F&B, named by `which`) against the actions
// before it: not run yet, its inputs there, W in ascending microbatch order.
bool RankCheck::check_against_done(std::size_t i, const Action& a, const std::string& which) {
  if (done(a.kind, a.microbatch, a.chunk)) {
    return fail_at(
        i, fmt::format("{}appears twice (also action {})", which, find({a.kind, a.microbatch, a.chunk, false})));
  }
  return check_dependencies(i, a) && check_weight_order(i, a);
}

bool RankCheck::check_fields(std::size_t i, const Action& a) {
  if (!training_ && (is_step_level(a.kind) || a.kind == ActionKind::loss)) {
    return fail_at(i, "a forward-only schedule has no LOSS, REDUCE_GRADS or OPTIMIZER_STEP");
  }
  if (is_step_level(a.kind)) return true;
  if (a.microbatch < 0 || a.microbatch >= s_.m) {
    return fail_at(i, fmt::format("microbatch {} is out of range 0..{} (m = {})", a.microbatch, s_.m - 1, s_.m));
  }
  if (a.chunk < 0 || a.chunk >= s_.v) {
    return fail_at(i, fmt::format("chunk {} is out of range 0..{} (v = {})", a.chunk, s_.v - 1, s_.v));
  }
  const int stage = s_.placement.stage(rank_, a.chunk);
  const int last = s_.placement.stage_count() - 1;
  if (a.kind == ActionKind::loss && stage != last) {
    const StagePlace place = s_.placement.place(last);
    return fail_at(i, fmt::format("only the last model stage ({} = rank {}, chunk {}) computes the loss, not stage {}",
                                  last, place.rank, place.chunk, stage));
  }
  return !is_communication(a.kind) || check_message(i, a);
}

// Peers and tags are what the placement says, so each message has one sender
// and one receiver, and the executor can match them without searching.
bool RankCheck::check_message(std::size_t i, const Action& a) {
  const int stage = s_.placement.stage(rank_, a.chunk);
  const bool towards_next = towards_next_stage(a.kind);
  const int other = towards_next ? stage + 1 : stage - 1;
  if (other < 0 || other >= s_.p * s_.v) {
    return fail_at(i, fmt::format("model stage {} is the {} stage; there is no {} stage to exchange with", stage,
                                  towards_next ? "last" : "first", towards_next ? "next" : "previous"));
  }
  const StagePlace place = detail::other_end(s_, rank_, a);
  if (place.rank == rank_) {
    return fail_at(i, fmt::format("model stage {} is on this rank too, so no message is needed", other));
  }
  if (a.peer != place.rank) {
    return fail_at(i, fmt::format("peer should be rank {}, which holds model stage {}", place.rank, other));
  }
  const Direction direction = direction_of(a.kind);
  const int tag = message_tag(a.microbatch, is_send(a.kind) ? a.chunk : place.chunk, s_.v, direction);
  if (a.tag != tag) {
    return fail_at(
        i, fmt::format("tag should be {} = 2*(microbatch*v + sending chunk) + {} for {}", tag,
                       static_cast<int>(direction), direction == Direction::activation ? "activations" : "gradients"));
  }
  return true;
}

bool RankCheck::need(std::size_t i, const Need& what) {
  if (done(what)) return true;
  const std::int32_t later = find(what, i + 1);
  if (later != absent) {
    return fail_at(i, fmt::format("needs {} before it, but that comes later (action {})", what.describe(), later));
  }
  return fail_at(i, fmt::format("needs {} before it on rank {}, but there is none", what.describe(), rank_));
}

bool RankCheck::check_dependencies(std::size_t i, const Action& a) {
  const int j = a.microbatch;
  const int c = a.chunk;
  const Placement& placement = s_.placement;
  const int stage = placement.stage(rank_, c);
  const int last = placement.stage_count() - 1;
  // A neighbouring stage on this rank hands its data over without a message.
  switch (a.kind) {
    case ActionKind::forward: {
      if (stage == 0) return true;
      const StagePlace previous = placement.place(stage - 1);
      if (previous.rank == rank_) return need(i, {ActionKind::forward, j, previous.chunk, false});
      return need(i, {ActionKind::recv_act, j, c, false});
    }
    case ActionKind::backward_input:
    case ActionKind::backward: {
      if (!need(i, {ActionKind::forward, j, c, false})) return false;
      if (stage == last) return need(i, {ActionKind::loss, j, c, false});
      const StagePlace next = placement.place(stage + 1);
      if (next.rank == rank_) return need(i, {ActionKind::backward, j, next.chunk, true});
      return need(i, {ActionKind::recv_grad, j, c, false});
    }
    case ActionKind::backward_weight:
      return need(i, {ActionKind::backward_input, j, c, false});
    case ActionKind::send_act:
    case ActionKind::loss:
      return need(i, {ActionKind::forward, j, c, false});
    case ActionKind::send_grad:
      return need(i, {ActionKind::backward, j, c, true});
    default:
      return true;
  }
}

// DESIGN.md §3: the same summation order on every schedule gives bitwise equal weights.
bool RankCheck::check_weight_order(std::size_t i, const Action& a) {
  if (a.kind != ActionKind::backward_weight && a.kind != ActionKind::backward) return true;
  auto& [previous, previous_at] = last_weight_[a.chunk];
  if (a.microbatch < previous) {
    return fail_at(i, fmt::format("weight gradients of chunk {} must accumulate in ascending microbatch order, but "
                                  "microbatch {} came first (action {})",
                                  a.chunk, previous, previous_at));
  }
  previous = a.microbatch;
  previous_at = static_cast<std::int32_t>(i);
  return true;
}

bool RankCheck::check_complete() {
  for (int c = 0; c < s_.v; ++c) {
    for (int j = 0; j < s_.m; ++j) {
      if (!done(ActionKind::forward, j, c)) {
        return fail_on_rank(fmt::format("{} is missing; every microbatch passes every model stage",
                                        Need{ActionKind::forward, j, c, false}.describe()));
      }
      if (!training_) continue;
      const bool full = done(ActionKind::backward, j, c);
      const bool input = done(ActionKind::backward_input, j, c);
      if (full && input) {
        return fail_at(find({ActionKind::backward_input, j, c, false}),
                       fmt::format("the same microbatch and chunk also has BW (action {}); use BW, or B and W",
                                   find({ActionKind::backward, j, c, false})));
      }
      if (!full && !input) {
        return fail_on_rank(fmt::format("mb={} chunk={} has no backward pass (BW, or B and W)", j, c));
      }
      if (input && !done(ActionKind::backward_weight, j, c)) {
        return fail_at(find({ActionKind::backward_input, j, c, false}),
                       "has no W; every B needs its weight gradient before REDUCE_GRADS");
      }
    }
  }
  return !training_ || check_step_actions();
}

bool RankCheck::check_step_actions() {
  if (reduce_ == absent || optimizer_ == absent) {
    return fail_on_rank(
        fmt::format("{} is missing; a training schedule ends every rank with REDUCE_GRADS and "
                    "OPTIMIZER_STEP",
                    reduce_ == absent ? "REDUCE_GRADS" : "OPTIMIZER_STEP"));
  }
  if (reduce_ < last_compute_) {
    return fail_at(reduce_, fmt::format("comes before action {} ({}); the gradient reduction follows every compute "
                                        "action of the step",
                                        last_compute_, describe((*actions_)[last_compute_])));
  }
  if (optimizer_ < reduce_) return fail_at(optimizer_, fmt::format("comes before REDUCE_GRADS (action {})", reduce_));
  return true;
}

}  // namespace

std::vector<Problem> find_problems(const Schedule& schedule, Checks checks) {
  if (schedule.p < 1 || schedule.v < 1 || schedule.m < 1 || static_cast<int>(schedule.ranks.size()) != schedule.p) {
    return {Problem{-1, -1,
                    fmt::format("p = {}, v = {}, m = {} with {} rank lists; a schedule needs p, v, m >= 1 and p lists",
                                schedule.p, schedule.v, schedule.m, schedule.ranks.size())}};
  }
  if (schedule.placement.p() != schedule.p || schedule.placement.v() != schedule.v) {
    return {Problem{-1, -1,
                    fmt::format("the stage placement is for p = {}, v = {}, but the schedule has p = {}, v = {}",
                                schedule.placement.p(), schedule.placement.v(), schedule.p, schedule.v)}};
  }
  std::vector<Problem> problems;
  RankCheck rank_check(schedule, schedule.training());
  for (int rank = 0; rank < schedule.p; ++rank) {
    if (auto problem = rank_check.check(rank)) problems.push_back(std::move(*problem));
  }
  if (!problems.empty() || checks == Checks::per_rank) return problems;
  // Only whether a message was sent matters here, not when: one byte per message.
  detail::Execution<std::int8_t> execution(schedule);
  execution.run([](int, std::size_t, const Action&, std::int8_t) { return std::int8_t{0}; });
  if (auto problem = execution.problem()) problems.push_back(std::move(*problem));
  return problems;
}

std::optional<Problem> find_problem(const Schedule& schedule, Checks checks) {
  auto problems = find_problems(schedule, checks);
  if (problems.empty()) return std::nullopt;
  return std::move(problems.front());
}

void validate(const Schedule& schedule, Checks checks) {
  if (auto problem = find_problem(schedule, checks)) {
    throw input_error(fmt::format("invalid {} schedule: {}", schedule.name, problem->message));
  }
}

}  // namespace kpipe::schedule
