#include "execution.hpp"

#include <fmt/format.h>

#include <string>

namespace kpipe::schedule::detail {

namespace {

// Where in `sender`'s list the send of `kind` for (microbatch, chunk) is, or -1.
std::int64_t find_send(const std::vector<Action>& sender, ActionKind kind, int microbatch, int chunk) {
  for (std::size_t i = 0; i < sender.size(); ++i) {
    const Action& a = sender[i];
    if (a.kind == kind && a.microbatch == microbatch && a.chunk == chunk) return static_cast<std::int64_t>(i);
  }
  return -1;
}

ActionKind matching_send(ActionKind receive) {
  return receive == ActionKind::recv_act ? ActionKind::send_act : ActionKind::send_grad;
}

}  // namespace

template <class Message>
Execution<Message>::Execution(const Schedule& schedule, int steps)
    : schedule_(schedule),
      steps_(static_cast<std::size_t>(steps)),
      messages_(2 * static_cast<std::size_t>(schedule.p) * schedule.m * schedule.v, not_sent),
      next_(schedule.p, 0),
      waiting_for_(schedule.p, not_waiting) {}

template <class Message>
bool Execution<Message>::finished() const {
  for (int r = 0; r < schedule_.p; ++r) {
    if (!done(r)) return false;
  }
  return true;
}

template <class Message>
std::optional<Problem> Execution<Message>::problem() const {
  if (!finished()) return stall_problem();
  if (sends_ != receives_) return unreceived_problem();
  return std::nullopt;
}

template <class Message>
std::optional<Problem> Execution<Message>::stall_problem() const {
  // A send to a stage that does not exist, or a blocked receive whose send
  // does not exist at all, is the simpler story.
  for (int r = 0; r < schedule_.p; ++r) {
    const auto& actions = schedule_.ranks[r];
    if (done(r)) continue;
    const std::size_t at = position(r);
    const Action& wait = actions[at];
    if (is_send(wait.kind)) {
      return Problem{r, static_cast<std::int64_t>(at),
                     fmt::format("rank {}, action {} ({}): model stage {} has no {} stage to send to", r, at,
                                 describe(wait), schedule_.placement.stage(r, wait.chunk),
                                 wait.kind == ActionKind::send_act ? "next" : "previous")};
    }
    const StagePlace sender = other_end(schedule_, r, wait);
    if (find_send(schedule_.ranks[sender.rank], matching_send(wait.kind), wait.microbatch, sender.chunk) < 0) {
      return Problem{r, static_cast<std::int64_t>(at),
                     fmt::format("rank {}, action {} ({}): nothing sends this message; rank {} has no {} mb={} "
                                 "chunk={}",
                                 r, at, describe(wait), sender.rank, name(matching_send(wait.kind)), wait.microbatch,
                                 sender.chunk)};
    }
  }
  // Every blocked rank waits for a send that its sender has not reached, so
  // following "waits for" from any blocked rank ends in a cycle.
  int first = 0;
  while (done(first)) ++first;
  std::vector<int> visited_at(schedule_.p, -1);
  std::vector<int> chain;
  int r = first;
  while (visited_at[r] < 0) {
    visited_at[r] = static_cast<int>(chain.size());
    chain.push_back(r);
    r = other_end(schedule_, r, schedule_.ranks[r][position(r)]).rank;
  }
  std::string story;
  constexpr std::size_t shown = 4;
  const std::size_t cycle_length = chain.size() - visited_at[r];
  for (std::size_t k = 0; k < cycle_length && k < shown; ++k) {
    const int waiter = chain[visited_at[r] + k];
    const Action& wait = schedule_.ranks[waiter][position(waiter)];
    const StagePlace sender = other_end(schedule_, waiter, wait);
    const auto send_at =
        find_send(schedule_.ranks[sender.rank], matching_send(wait.kind), wait.microbatch, sender.chunk);
    story += fmt::format("{}rank {} blocks at action {} ({}) until rank {} reaches action {} ({})",
                         k == 0 ? "" : ", while ", waiter, position(waiter), describe(wait), sender.rank, send_at,
                         describe(schedule_.ranks[sender.rank][send_at]));
  }
  if (cycle_length > shown) story += fmt::format(", and {} more ranks", cycle_length - shown);
  const int head = chain[visited_at[r]];
  return Problem{head, static_cast<std::int64_t>(position(head)),
                 fmt::format("deadlock across ranks: {}; reorder so that each send comes before the receive that "
                             "waits for it",
                             story)};
}

template <class Message>
std::optional<Problem> Execution<Message>::unreceived_problem() const {
  for (int r = 0; r < schedule_.p; ++r) {
    const auto& actions = schedule_.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (!is_send(a.kind)) continue;
      const StagePlace to = other_end(schedule_, r, a);
      if (messages_[slot(a.kind, to.rank, a.microbatch, to.chunk)] < 0) continue;
      const ActionKind receive = matching_receive(a.kind);
      return Problem{r, static_cast<std::int64_t>(i),
                     fmt::format("rank {}, action {} ({}): no matching receive; rank {} has no {} mb={} chunk={}", r, i,
                                 describe(a), to.rank, name(receive), a.microbatch, to.chunk)};
    }
  }
  return std::nullopt;
}

template class Execution<double>;
template class Execution<std::int8_t>;

}  // namespace kpipe::schedule::detail
