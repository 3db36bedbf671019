#pragma once
// One step of one pipeline rank: the unit of the schedule IR (DESIGN.md §2).
// Actions are plain 12-byte values so that a plan with tens of millions of
// them stays cheap to build, check and simulate.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpipe::schedule {

// The same names are used in the text form, the traces and the SVG.
enum class ActionKind : std::uint8_t {
  forward,          // F: forward pass of one microbatch through one model chunk
  backward_input,   // B: input gradient only (split-backward schedules)
  backward_weight,  // W: weight gradient of an earlier B
  backward,         // BW: full backward pass (B and W together)
  send_act,         // SEND_ACT: activation to the next model stage
  recv_act,         // RECV_ACT: activation from the previous model stage
  send_grad,        // SEND_GRAD: input gradient to the previous model stage
  recv_grad,        // RECV_GRAD: output gradient from the next model stage
  loss,             // LOSS: loss and its gradient, on the last model stage
  reduce_grads,     // REDUCE_GRADS: data-parallel gradient all-reduce, once per step
  optimizer_step,   // OPTIMIZER_STEP: weight update, once per step
  // F&B: one microbatch's F overlapped with another's BW on the same rank
  // (DualPipe). Last, so that the numbers of the other kinds, which profiles
  // store, stay what they were.
  forward_backward,
};
inline constexpr int action_kind_count = 12;

// Field widths follow the deck's limits: v <= 64 chunks, p <= 4096 ranks.
struct Action {
  ActionKind kind = ActionKind::forward;
  std::int8_t chunk = -1;        // model chunk on this rank; -1 for step-level actions
  std::int16_t peer = -1;        // communication: the other rank; else -1
  std::int32_t microbatch = -1;  // -1 for step-level actions
  std::int32_t tag = -1;         // communication: the message tag; else -1

  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.chunk == b.chunk && a.microbatch == b.microbatch && a.peer == b.peer && a.tag == b.tag;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};
static_assert(sizeof(Action) == 12, "Action must stay a compact 12-byte value");
inline constexpr int max_chunks = 127;   // what Action::chunk holds
inline constexpr int max_ranks = 32767;  // what Action::peer holds

inline Action compute_action(ActionKind kind, int microbatch, int chunk) {
  return {kind, static_cast<std::int8_t>(chunk), -1, microbatch, -1};
}
inline Action message_action(ActionKind kind, int microbatch, int chunk, int peer, int tag) {
  return {kind, static_cast<std::int8_t>(chunk), static_cast<std::int16_t>(peer), microbatch, tag};
}
inline Action step_action(ActionKind kind) { return {kind, -1, -1, -1, -1}; }

// An F&B keeps its F in (microbatch, chunk) and its BW in (tag, peer): a
// compute action has no message fields, so the pair stays a 12-byte Action.
// Everything that needs the halves asks forward_half and backward_half.
inline Action overlapped_action(int forward_microbatch, int forward_chunk, int backward_microbatch,
                                int backward_chunk) {
  return {ActionKind::forward_backward, static_cast<std::int8_t>(forward_chunk),
          static_cast<std::int16_t>(backward_chunk), forward_microbatch, backward_microbatch};
}
inline Action forward_half(const Action& overlapped) {
  return compute_action(ActionKind::forward, overlapped.microbatch, overlapped.chunk);
}
inline Action backward_half(const Action& overlapped) {
  return compute_action(ActionKind::backward, overlapped.tag, overlapped.peer);
}
// Calls part(a) for each compute action `a` stands for: an F&B's F, then its
// BW; any other action itself.
template <class Part>
void for_each_part(const Action& a, Part&& part) {
  if (a.kind == ActionKind::forward_backward) {
    part(forward_half(a));
    part(backward_half(a));
  } else {
    part(a);
  }
}

// F, B, W, BW and F&B: the actions that cost compute time.
constexpr bool is_compute(ActionKind k) { return k <= ActionKind::backward || k == ActionKind::forward_backward; }
// B and BW: the actions that release a stashed activation.
constexpr bool releases_stash(ActionKind k) { return k == ActionKind::backward_input || k == ActionKind::backward; }
constexpr bool is_send(ActionKind k) { return k == ActionKind::send_act || k == ActionKind::send_grad; }
constexpr bool is_receive(ActionKind k) { return k == ActionKind::recv_act || k == ActionKind::recv_grad; }
constexpr bool is_communication(ActionKind k) { return is_send(k) || is_receive(k); }
constexpr bool is_step_level(ActionKind k) { return k == ActionKind::reduce_grads || k == ActionKind::optimizer_step; }
// Where measured compute time is booked: 0 F (with LOSS, which runs inside the
// last stage's forward work), 1 B, 2 W, 3 BW; -1 for every other action (an
// F&B's time is two halves' at once, so it calibrates neither).
constexpr int compute_slot(ActionKind k) {
  switch (k) {
    case ActionKind::forward:
    case ActionKind::loss:
      return 0;
    case ActionKind::backward_input:
      return 1;
    case ActionKind::backward_weight:
      return 2;
    case ActionKind::backward:
      return 3;
    default:
      return -1;
  }
}

// What a message carries: activations flow to the next model stage, gradients
// to the previous one.
enum class Direction { activation = 0, gradient = 1 };
constexpr Direction direction_of(ActionKind k) {
  return k == ActionKind::send_act || k == ActionKind::recv_act ? Direction::activation : Direction::gradient;
}
// True when the peer of a message action holds the next model stage (a sent
// activation, a received gradient); false when it holds the previous one. The
// tensor then crosses this stage's output boundary, else its input boundary.
constexpr bool towards_next_stage(ActionKind k) { return k == ActionKind::send_act || k == ActionKind::recv_grad; }
// The receive that matches a send.
constexpr ActionKind matching_receive(ActionKind send) {
  return send == ActionKind::send_act ? ActionKind::recv_act : ActionKind::recv_grad;
}

// The most microbatches a rank's action list holds between F and B/BW; it
// depends on the order of the list only, not on time. An F&B stashes its F's
// activation before its BW releases another: DeepSeek's PP+1. With limit > 0,
// first_over_limit is the index of the first F that holds more than `limit`
// (actions.size() when none does).
struct StashPeak {
  int peak = 0;
  std::size_t first_over_limit = 0;
};
StashPeak peak_stash(const std::vector<Action>& actions, int limit = 0);

// The most (microbatch, chunk) activations a rank's action list holds from F
// until their W or BW: the Zero Bubble papers' count, in which a B frees only
// what its W does not need.
int peak_held(const std::vector<Action>& actions);

// "F", "SEND_ACT", "F&B", ...; and back, nullopt for an unknown name.
std::string_view name(ActionKind kind);
std::optional<ActionKind> parse_kind(std::string_view name);

// The action as one line of the text form: "F mb=3 chunk=0",
// "SEND_ACT mb=3 chunk=0 peer=1 tag=6", "F&B mb=5 chunk=0 bw_mb=2 bw_chunk=1",
// "OPTIMIZER_STEP".
std::string describe(const Action& action);

}  // namespace kpipe::schedule
