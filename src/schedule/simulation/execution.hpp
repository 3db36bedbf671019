#pragma once
// Runs the ranks of a schedule the way the executor does: each rank through
// its list in order, sends never block, a receive waits until its message has
// been sent. The validator uses it to find cycles across ranks (a deadlock
// under blocking receives) and unmatched messages; the simulator uses it to
// give every action its time. One pass, O(actions).
//
// With steps > 1 each rank runs its list that many times back to back (it
// starts step k+1 as soon as its own step k ends), reusing one message slot
// per (microbatch, chunk) across steps: in a training schedule that passed
// validate(), a rank sends step k+1's message only after the receiver has
// taken step k's (the sender's own step k waited on the receiver's reply), so
// the slots are as many as one step needs however many steps run.
//
// Precondition: microbatches and chunks in range (the text form and the
// generators guarantee it); everything else that is wrong in a schedule comes
// out as a problem(), never as a memory error.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/validate.hpp"

namespace kpipe::schedule::detail {

// The other end of a message action of `rank`: where its model stage's
// next (activations sent, gradients received) or previous stage lives;
// chunk -1 past the first or the last stage.
inline StagePlace other_end(const Schedule& s, int rank, const Action& message) {
  const bool towards_next = towards_next_stage(message.kind);
  const int other = s.placement.stage(rank, message.chunk) + (towards_next ? 1 : -1);
  if (other < 0 || other >= s.placement.stage_count()) return {rank, -1};
  return s.placement.place(other);
}

// Message is what a send leaves for its receive: the arrival time for the
// simulator, just "sent" for the validator. Values >= 0; the engine uses -1
// and -2 for "not sent yet" and "received".
template <class Message>
class Execution {
 public:
  explicit Execution(const Schedule& schedule, int steps = 1);

  // Calls visit(rank, index, action, message) for every action, in an order
  // that respects every dependency: each rank in list order, a receive only
  // after its send. A send's visit returns its message; a receive's visit gets
  // it; other visits get and return 0.
  template <class Visit>
  void run(Visit&& visit);

  bool finished() const;
  // Why a run did not finish (a cycle or a receive without a send), or why a
  // finished run left a message unreceived; nullopt when neither happened.
  std::optional<Problem> problem() const;

 private:
  std::size_t slot(ActionKind kind, int rank, int microbatch, int chunk) const {
    const std::size_t direction = (kind == ActionKind::send_grad || kind == ActionKind::recv_grad) ? 1 : 0;
    // Chunk-major: a rank receives runs of consecutive microbatches of one chunk.
    return ((direction * schedule_.p + rank) * schedule_.v + chunk) * schedule_.m + microbatch;
  }
  bool done(int rank) const { return next_[rank] >= schedule_.ranks[rank].size() * steps_; }
  // Where in its list the blocked or stopped `rank` is (it has not finished).
  std::size_t position(int rank) const { return next_[rank] % schedule_.ranks[rank].size(); }
  std::optional<Problem> stall_problem() const;
  std::optional<Problem> unreceived_problem() const;

  static constexpr Message not_sent = -1;
  static constexpr Message received = -2;
  static constexpr std::size_t not_waiting = static_cast<std::size_t>(-1);

  const Schedule& schedule_;
  std::size_t steps_;
  std::vector<Message> messages_;         // per (direction, receiving rank, chunk, microbatch)
  std::vector<std::size_t> next_;         // per rank: index of the next action to run, counting over all steps
  std::vector<std::size_t> waiting_for_;  // per rank: the message slot it blocks on, or not_waiting
  std::size_t sends_ = 0;
  std::size_t receives_ = 0;
};

template <class Message>
template <class Visit>
void Execution<Message>::run(Visit&& visit) {
  // Ranks that can make progress, as a stack: rank 0 first, then whichever
  // rank a send has just unblocked.
  std::vector<int> ready(schedule_.p);
  for (int r = 0; r < schedule_.p; ++r) ready[r] = schedule_.p - 1 - r;
  while (!ready.empty()) {
    const int rank = ready.back();
    ready.pop_back();
    const auto& actions = schedule_.ranks[rank];
    const std::size_t n = actions.size(), end = n * steps_;
    std::size_t i = next_[rank];
    // j: where action i is in the list (i mod n, without a division per action).
    for (std::size_t j = n == 0 ? 0 : i % n; i < end; ++i, j = j + 1 == n ? 0 : j + 1) {
      const Action& a = actions[j];
      if (is_receive(a.kind)) {
        const std::size_t at = slot(a.kind, rank, a.microbatch, a.chunk);
        if (messages_[at] < 0) {
          waiting_for_[rank] = at;
          break;
        }
        visit(rank, i, a, messages_[at]);
        messages_[at] = received;
        ++receives_;
      } else if (is_send(a.kind)) {
        const StagePlace to = other_end(schedule_, rank, a);
        // A send past the first or last stage goes nowhere: the rank stops
        // there, and problem() names it.
        if (to.chunk < 0 || to.chunk >= schedule_.v) break;
        const std::size_t at = slot(a.kind, to.rank, a.microbatch, to.chunk);
        messages_[at] = visit(rank, i, a, Message{0});
        ++sends_;
        if (waiting_for_[to.rank] == at) {
          waiting_for_[to.rank] = not_waiting;
          ready.push_back(to.rank);
        }
      } else {
        visit(rank, i, a, Message{0});
      }
    }
    next_[rank] = i;
  }
}

}  // namespace kpipe::schedule::detail
