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
// (p+4)//3 for V-Min, against 1F1B's p. The W's take the free slots, the
// oldest B's first. kpipe squeezes the F's and B's: in slot order, each moves
// to the earliest free slot after its inputs where the rank, its W's again
// in the free slots after it, holds no more than the block's peak; that
// closes the gaps of the warm-up and the cool-down. The plan is made at
// F = B = W, as the authors make it.

enum Slot : int { forward_out, forward_back, backward_back, backward_out };
constexpr int slots_per_block = 6;

struct Block {
  // first[r][kind]: the slot of microbatch 0's action of that kind on rank r.
  std::vector<std::array<int, 4>> first;
};

// The authors' offsets (the V-Half and V-Min building blocks of the paper's
// figures); the gap after the turn keeps the four kinds of one rank on
// distinct slots modulo the block length, for every p and rank (their
// differences are odd, or 1 to 5 modulo 6), so no two actions share a slot.
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

// What a rank holds after a slot: (microbatch, chunk) activations from F to
// W, and B's whose W has not run.
struct Held {
  int activations = 0;
  int waiting_weights = 0;
  friend bool operator==(const Held& a, const Held& b) {
    return a.activations == b.activations && a.waiting_weights == b.waiting_weights;
  }
};

// One rank's F's and B's (index j·4 + kind for microbatch j, kinds in Slot
// order) and its slots: which of them sits in each, and what the rank holds
// after each with the W's in the free slots.
struct RankSlots {
  std::vector<Action> actions;
  std::vector<int> slot_of;   // per action
  std::vector<int> occupant;  // per slot: an action index or free_slot
  std::vector<Held> held;     // per slot
};

class Squeeze {
 public:
  Squeeze(int p, int m, const Block& block) : p_(p), m_(m), placement_(Placement::v_shape(p)), ranks_(p) {
    for (int r = 0; r < p; ++r) lay_out(ranks_[static_cast<std::size_t>(r)], block.first[static_cast<std::size_t>(r)]);
    for (const RankSlots& rank : ranks_) {
      for (const Held& h : rank.held) cap_ = std::max(cap_, h.activations);
    }
  }

  std::vector<std::vector<Action>> run() {
    // Every F and B moves once, when its slot in the block comes up: its
    // inputs sit in earlier slots, so they have moved already.
    std::vector<std::vector<int>> block_slots;
    std::size_t slots = 0;
    for (const RankSlots& rank : ranks_) {
      block_slots.push_back(rank.occupant);
      slots = std::max(slots, rank.occupant.size());
    }
    for (std::size_t t = 0; t < slots; ++t) {
      for (int r = 0; r < p_; ++r) {
        const std::vector<int>& block = block_slots[static_cast<std::size_t>(r)];
        if (t < block.size() && block[t] != free_slot) move_earlier(r, block[t]);
      }
    }
    std::vector<std::vector<Action>> plan;
    for (const RankSlots& rank : ranks_) plan.push_back(in_slot_order(rank));
    return plan;
  }

 private:
  // F's and B's at the block's slots, with room after the last for every W.
  void lay_out(RankSlots& rank, const std::array<int, 4>& first) const {
    const int last = *std::max_element(first.begin(), first.end()) + slots_per_block * (m_ - 1);
    rank.occupant.assign(static_cast<std::size_t>(last) + 1 + 2 * static_cast<std::size_t>(m_), free_slot);
    constexpr std::array<std::pair<ActionKind, int>, 4> kinds = {std::pair{ActionKind::forward, 0},
                                                                 {ActionKind::forward, 1},
                                                                 {ActionKind::backward_input, 1},
                                                                 {ActionKind::backward_input, 0}};
    for (int j = 0; j < m_; ++j) {
      for (int k = 0; k < 4; ++k) {
        const int t = first[k] + slots_per_block * j;
        rank.occupant[static_cast<std::size_t>(t)] = static_cast<int>(rank.actions.size());
        rank.actions.push_back(compute_action(kinds[k].first, j, kinds[k].second));
        rank.slot_of.push_back(t);
      }
    }
    rank.held.assign(rank.occupant.size(), Held{});
    Held held;
    for (std::size_t t = 0; t < rank.occupant.size(); ++t) rank.held[t] = held = after(rank, t, held);
  }

  // What the rank holds after slot t, from what it held before: an F adds an
  // activation, a B a waiting W, and a free slot runs the oldest waiting W.
  static Held after(const RankSlots& rank, std::size_t t, Held held) {
    const int a = rank.occupant[t];
    if (a == free_slot) {
      if (held.waiting_weights > 0) {
        --held.waiting_weights;
        --held.activations;
      }
    } else if (rank.actions[static_cast<std::size_t>(a)].kind == ActionKind::forward) {
      ++held.activations;
    } else {
      ++held.waiting_weights;
    }
    return held;
  }

  // The slot of microbatch j's `kind` (a Slot) on rank r now.
  int slot(int r, int j, Slot kind) const {
    return ranks_[static_cast<std::size_t>(r)].slot_of[static_cast<std::size_t>(j) * 4 + kind];
  }
  static Slot slot_kind(ActionKind kind, int chunk) {
    if (kind == ActionKind::forward) return chunk == 0 ? forward_out : forward_back;
    return chunk == 0 ? backward_out : backward_back;
  }

  // The last slot an action's inputs occupy: the neighbouring stage's F or B,
  // its own F (for a B), and the same kind's previous microbatch.
  int inputs_done(int r, const Action& a) const {
    const int stage = placement_.stage(r, a.chunk);
    int done = -1;
    if (a.kind == ActionKind::forward && stage > 0) {
      const StagePlace before = placement_.place(stage - 1);
      done = slot(before.rank, a.microbatch, slot_kind(ActionKind::forward, before.chunk));
    } else if (a.kind == ActionKind::backward_input) {
      done = slot(r, a.microbatch, slot_kind(ActionKind::forward, a.chunk));
      if (stage + 1 < placement_.stage_count()) {
        const StagePlace after = placement_.place(stage + 1);
        done = std::max(done, slot(after.rank, a.microbatch, slot_kind(ActionKind::backward_input, after.chunk)));
      }
    }
    if (a.microbatch > 0) done = std::max(done, slot(r, a.microbatch - 1, slot_kind(a.kind, a.chunk)));
    return done;
  }

  void move_earlier(int r, int index) {
    RankSlots& rank = ranks_[static_cast<std::size_t>(r)];
    const Action& a = rank.actions[static_cast<std::size_t>(index)];
    const int from = rank.slot_of[static_cast<std::size_t>(index)];
    for (int t = inputs_done(r, a) + 1; t < from; ++t) {
      if (rank.occupant[static_cast<std::size_t>(t)] == free_slot && fits_at(rank, index, from, t)) return;
    }
  }

  // Moves action `index` from slot `from` to the free slot t when the rank
  // then holds no more than the cap; the W's after t shift until the rank
  // holds again what it held before.
  bool fits_at(RankSlots& rank, int index, int from, int t) {
    rank.occupant[static_cast<std::size_t>(t)] = index;
    rank.occupant[static_cast<std::size_t>(from)] = free_slot;
    changed_.clear();
    Held held = t > 0 ? rank.held[static_cast<std::size_t>(t) - 1] : Held{};
    for (std::size_t u = static_cast<std::size_t>(t); u < rank.occupant.size(); ++u) {
      held = after(rank, u, held);
      if (u > static_cast<std::size_t>(from) && held == rank.held[u]) break;
      if (held.activations > cap_) {
        rank.occupant[static_cast<std::size_t>(from)] = index;
        rank.occupant[static_cast<std::size_t>(t)] = free_slot;
        return false;
      }
      changed_.push_back(held);
    }
    std::copy(changed_.begin(), changed_.end(), rank.held.begin() + t);
    rank.slot_of[static_cast<std::size_t>(index)] = t;
    return true;
  }

  // The F's and B's in slot order, each free slot running the oldest waiting W.
  static std::vector<Action> in_slot_order(const RankSlots& rank) {
    std::vector<Action> order;
    order.reserve(rank.actions.size() / 2 * 3);
    std::deque<Action> waiting;
    for (const int a : rank.occupant) {
      if (a != free_slot) {
        const Action& action = rank.actions[static_cast<std::size_t>(a)];
        order.push_back(action);
        if (action.kind == ActionKind::backward_input) {
          waiting.push_back(compute_action(ActionKind::backward_weight, action.microbatch, action.chunk));
        }
      } else if (!waiting.empty()) {
        order.push_back(waiting.front());
        waiting.pop_front();
      }
    }
    return order;
  }

  int p_;
  int m_;
  Placement placement_;
  std::vector<RankSlots> ranks_;
  int cap_ = 0;
  std::vector<Held> changed_;  // fits_at's new states, reused
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
