#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable
// Memory", NeurIPS 2024, arXiv 2405.15362): a V of two chunks per rank
// (Placement::v_shape, chunk 0 on the way out, chunk 1 on the way back)
// built by repeating one building block every 6 slots, a slot being one F,
// B or W of one model chunk. The block fixes, per rank, the slot of a
// microbatch's F of chunk 0, F of chunk 1, B of chunk 1 and B of chunk 0;
// the lifespan of the block, from the first F to the last W, sets the peak
// activation memory: the authors' (p+2)//2 stage-microbatches for V-Half and
// (p+4)//3 for V-Min, against 1F1B's p. kpipe then fills the free slots with
// W's (the oldest B first), and squeezes: in slot order, each action moves to
// the earliest free slot after its inputs where the rank's memory stays
// within the block's peak, which closes the gaps of the warm-up and the
// cool-down. The plan is made at F = B = W, as the authors make it.

enum Slot : int { forward_out, forward_back, backward_back, backward_out };
constexpr int slots_per_block = 6;

struct Block {
  // first[r][kind]: the slot of microbatch 0's action of that kind on rank r.
  std::vector<std::array<int, 4>> first;
};

// The authors' offsets (the V-Half and V-Min building blocks of the paper's
// figures); the gap after the turn keeps the four kinds of one rank on
// distinct slots modulo the block length.
Block v_half_block(int p) {
  const int gap = p % 2 == 0 ? 3 : 0;
  Block block;
  for (int r = 0; r < p; ++r)
    block.first.push_back({2 * r, 3 * p - r - 2, 3 * p + gap + 2 * r - 1, 6 * p + gap - r - 2});
  return block;
}

Block v_min_block(int p) {
  const int gap = p % 3 == 0 ? 2 : 0;
  Block block;
  for (int r = 0; r < p; ++r) block.first.push_back({r, 2 * p - r - 1, 2 * p + gap + r, 4 * p + gap - r - 1});
  return block;
}

constexpr int free_slot = -1;

// One rank's slots: which action (an index into `actions`) sits in each, and
// the (microbatch, chunk) activations it holds at each, F to W.
struct RankSlots {
  std::vector<Action> actions;
  std::vector<int> slot_of;   // per action
  std::vector<int> index_of;  // per (kind, chunk, microbatch): see key()
  std::vector<int> occupant;  // per slot: an action index or free_slot
  std::vector<int> held;      // per slot
};

class Squeeze {
 public:
  Squeeze(int p, int m, const Block& block) : p_(p), m_(m), placement_(Placement::v_shape(p)), ranks_(p) {
    for (RankSlots& rank : ranks_) rank.index_of.assign(3 * 2 * static_cast<std::size_t>(m), 0);
    for (int r = 0; r < p; ++r) lay_out(r, block.first[static_cast<std::size_t>(r)]);
    for (const RankSlots& rank : ranks_) cap_ = std::max(cap_, *std::max_element(rank.held.begin(), rank.held.end()));
  }

  std::vector<std::vector<Action>> run() {
    std::size_t horizon = 0;
    for (const RankSlots& rank : ranks_) horizon = std::max(horizon, rank.occupant.size());
    // Every action is moved once, when its original slot comes up: inputs sit
    // in earlier slots, so they have moved already.
    std::vector<std::vector<int>> original(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) original[r] = ranks_[r].occupant;
    for (std::size_t t = 0; t < horizon; ++t) {
      for (int r = 0; r < p_; ++r) {
        const auto& slots = original[static_cast<std::size_t>(r)];
        if (t < slots.size() && slots[t] != free_slot) move_earlier(r, slots[t]);
      }
    }
    std::vector<std::vector<Action>> plan;
    for (RankSlots& rank : ranks_) {
      std::vector<Action> order;
      order.reserve(rank.actions.size());
      for (const int a : rank.occupant) {
        if (a != free_slot) order.push_back(rank.actions[static_cast<std::size_t>(a)]);
      }
      plan.push_back(std::move(order));
    }
    return plan;
  }

 private:
  // F's and B's at the block's slots, then W's in the free slots, the oldest
  // B's first, the rest after the last B.
  void lay_out(int r, const std::array<int, 4>& first) {
    RankSlots& rank = ranks_[static_cast<std::size_t>(r)];
    const int last = *std::max_element(first.begin(), first.end()) + slots_per_block * (m_ - 1);
    rank.occupant.assign(static_cast<std::size_t>(last) + 1, free_slot);
    const std::array<std::pair<ActionKind, int>, 4> kinds = {std::pair{ActionKind::forward, 0},
                                                             {ActionKind::forward, 1},
                                                             {ActionKind::backward_input, 1},
                                                             {ActionKind::backward_input, 0}};
    for (int j = 0; j < m_; ++j) {
      for (int k = 0; k < 4; ++k)
        place(rank, first[k] + slots_per_block * j, compute_action(kinds[k].first, j, kinds[k].second));
    }
    std::deque<Action> waiting;
    for (int t = 0; t < static_cast<int>(rank.occupant.size()) || !waiting.empty(); ++t) {
      if (t < static_cast<int>(rank.occupant.size()) && rank.occupant[t] != free_slot) {
        const Action& a = rank.actions[static_cast<std::size_t>(rank.occupant[t])];
        if (a.kind == ActionKind::backward_input)
          waiting.push_back(compute_action(ActionKind::backward_weight, a.microbatch, a.chunk));
      } else if (!waiting.empty()) {
        place(rank, t, waiting.front());
        waiting.pop_front();
      }
    }
    rank.held.assign(rank.occupant.size(), 0);
    int held = 0;
    for (std::size_t t = 0; t < rank.occupant.size(); ++t) {
      if (rank.occupant[t] != free_slot) held += held_change(rank.actions[static_cast<std::size_t>(rank.occupant[t])]);
      rank.held[t] = held;
    }
  }

  void place(RankSlots& rank, int t, const Action& a) const {
    if (t >= static_cast<int>(rank.occupant.size())) rank.occupant.resize(static_cast<std::size_t>(t) + 1, free_slot);
    rank.occupant[static_cast<std::size_t>(t)] = static_cast<int>(rank.actions.size());
    rank.index_of[key(a.kind, a.microbatch, a.chunk)] = static_cast<int>(rank.actions.size());
    rank.actions.push_back(a);
    rank.slot_of.push_back(t);
  }

  static int held_change(const Action& a) {
    return a.kind == ActionKind::forward ? 1 : a.kind == ActionKind::backward_weight ? -1 : 0;
  }

  std::size_t key(ActionKind kind, int microbatch, int chunk) const {
    const int k = kind == ActionKind::forward ? 0 : kind == ActionKind::backward_input ? 1 : 2;
    return (static_cast<std::size_t>(k) * 2 + chunk) * m_ + microbatch;
  }

  // Where (kind, microbatch, chunk) of rank r sits now.
  int slot(int r, ActionKind kind, int microbatch, int chunk) const {
    const RankSlots& rank = ranks_[static_cast<std::size_t>(r)];
    return rank.slot_of[static_cast<std::size_t>(rank.index_of[key(kind, microbatch, chunk)])];
  }

  // The last slot an action's inputs occupy: the neighbouring stage's F or B,
  // its own F (for a B) or B (for a W), and the same kind's previous microbatch.
  int inputs_done(int r, const Action& a) const {
    const int stage = placement_.stage(r, a.chunk);
    int done = -1;
    if (a.kind == ActionKind::forward && stage > 0) {
      const StagePlace before = placement_.place(stage - 1);
      done = slot(before.rank, ActionKind::forward, a.microbatch, before.chunk);
    } else if (a.kind == ActionKind::backward_input) {
      done = slot(r, ActionKind::forward, a.microbatch, a.chunk);
      if (stage + 1 < placement_.stage_count()) {
        const StagePlace after = placement_.place(stage + 1);
        done = std::max(done, slot(after.rank, ActionKind::backward_input, a.microbatch, after.chunk));
      }
    } else if (a.kind == ActionKind::backward_weight) {
      done = slot(r, ActionKind::backward_input, a.microbatch, a.chunk);
    }
    if (a.microbatch > 0) done = std::max(done, slot(r, a.kind, a.microbatch - 1, a.chunk));
    return done;
  }

  void move_earlier(int r, int index) {
    RankSlots& rank = ranks_[static_cast<std::size_t>(r)];
    const Action a = rank.actions[static_cast<std::size_t>(index)];
    const int from = rank.slot_of[static_cast<std::size_t>(index)];
    const int change = held_change(a);
    for (int t = inputs_done(r, a) + 1; t < from; ++t) {
      if (rank.occupant[static_cast<std::size_t>(t)] != free_slot) continue;
      if (change > 0 && *std::max_element(rank.held.begin() + t, rank.held.begin() + from) + change > cap_) continue;
      rank.occupant[static_cast<std::size_t>(t)] = index;
      rank.occupant[static_cast<std::size_t>(from)] = free_slot;
      rank.slot_of[static_cast<std::size_t>(index)] = t;
      for (int u = t; u < from; ++u) rank.held[static_cast<std::size_t>(u)] += change;
      return;
    }
  }

  int p_;
  int m_;
  Placement placement_;
  std::vector<RankSlots> ranks_;
  int cap_ = 0;
};

template <Block (*block)(int)>
RankGenerator generator(const ScheduleSpec& spec) {
  return hand_out(Squeeze(spec.p, spec.m, block(spec.p)).run());
}

template <const char* name>
std::optional<std::string> check(const ShapeCheck& shape) {
  if (shape.v != 2) {
    return fmt::format(
        "the {} schedule places two model chunks per rank in a V; set pipeline.virtual_stages = 2 (now {})", name,
        shape.describe_virtual_stages());
  }
  return std::nullopt;
}

// The authors state the bubble only as a limit at F = B = W (about half and
// two thirds of 1F1B's); kpipe reports the simulated one.
std::optional<TheoreticalBubble> no_formula(int, int, int, const StageCosts&) { return std::nullopt; }

ActivationBound v_half_bound(int p) { return {(p + 2) / 2, "(p+2)//2"}; }
ActivationBound v_min_bound(int p) { return {(p + 4) / 3, "(p+4)//3"}; }

constexpr char v_half_name[] = "v-half";
constexpr char v_min_name[] = "v-min";

}  // namespace

const ScheduleInfo& v_half_info() {
  static const ScheduleInfo info{v_half_name,
                                 "Qi et al.'s V-Half: a V of two chunks per rank holding half of 1F1B's activations",
                                 true,
                                 generator<v_half_block>,
                                 check<v_half_name>,
                                 v_placement,
                                 no_formula,
                                 nullptr,
                                 false,
                                 v_half_bound};
  return info;
}

const ScheduleInfo& v_min_info() {
  static const ScheduleInfo info{v_min_name,
                                 "Qi et al.'s V-Min: a V of two chunks per rank holding a third of 1F1B's activations",
                                 true,
                                 generator<v_min_block>,
                                 check<v_min_name>,
                                 v_placement,
                                 no_formula,
                                 nullptr,
                                 false,
                                 v_min_bound};
  return info;
}

}  // namespace kpipe::schedule::detail
