#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <utility>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// Rank r of a V (Placement::v_shape) holds model stage r (chunk `down`, on
// the way out from rank 0) and model stage 2p-1-r (chunk `up`, on the way back).
constexpr int down = 0;
constexpr int up = 1;

// Which waits a variant fills with a W even when the W outlasts the wait.
struct Variant {
  bool before_up_backward = true;
  bool before_forward = true;
};

// A variant that cannot place every action; the search drops it.
struct Unplaceable {};

// One pass of the round-based V heuristic of Qi et al. ("Pipeline Parallelism
// with Controllable Memory", arXiv 2405.15362; repository
// sail-sg/zero-bubble-pipeline-parallelism): a warm-up of forwards shaped by
// when each rank's first `up` forward comes back, then rounds in which every
// rank places one B and one F at the exact times their inputs arrive,
// filling the wait before each with pending W's when a W fits, or when
// waiting would make the rank's idle time exceed the budget `approved` (the
// previous pass's idle time per rank, which the search narrows), then the
// remaining W's. Memory is counted in half activations: an F holds two, a B
// frees one and its W the other (the W still needs the layer inputs), within
// 1F1B's peak of 2p activations of a model stage per rank.
class VShapePass {
 public:
  VShapePass(int p, int m, const PlanningCosts& costs, Variant variant, const std::vector<double>& approved)
      : p_(p),
        m_(m),
        placement_(Placement::v_shape(p)),
        costs_(costs),
        variant_(variant),
        approved_(approved),
        max_approved_(approved.empty() ? 0.0 : *std::max_element(approved.begin(), approved.end())),
        forward_end_(static_cast<std::size_t>(2 * p) * m, pending),
        backward_end_(forward_end_.size(), pending),
        ranks_(static_cast<std::size_t>(p)) {
    for (Rank& rank : ranks_) rank.actions.reserve(6 * static_cast<std::size_t>(m));
  }

  // Throws Unplaceable when this variant gets stuck.
  void run() {
    warm_up();
    for (int round = 0; round < 2 * m_; ++round) {
      backwards_of_round();
      forwards_of_round();
    }
    for (int r = 0; r < p_; ++r) {
      while (!rank(r).weights.empty()) place_weight(r);
      const Rank& done = rank(r);
      for (int c : {down, up}) {
        if (done.forwards[c] != m_ || done.backwards[c] != m_) throw Unplaceable{};
      }
    }
  }

  std::vector<double> idle() const {
    std::vector<double> out;
    for (const Rank& rank : ranks_) out.push_back(rank.idle);
    return out;
  }
  double worst_idle() const { return worst_idle_; }
  std::vector<std::vector<Action>> take_plan() {
    std::vector<std::vector<Action>> plan;
    for (Rank& rank : ranks_) plan.push_back(std::move(rank.actions));
    return plan;
  }

 private:
  static constexpr double pending = -1.0;
  static constexpr int forward_memory = 2;  // half activations
  struct Rank {
    double clock = 0.0;
    double idle = 0.0;  // since its first forward
    int memory = 0;
    int forwards[2] = {0, 0};
    int backwards[2] = {0, 0};
    std::deque<std::pair<int, int>> weights;  // (chunk, microbatch) of the pending W's, oldest first
    std::vector<Action> actions;
  };

  Rank& rank(int r) { return ranks_[static_cast<std::size_t>(r)]; }
  int memory_limit() const { return forward_memory * 2 * p_; }
  double& end_at(std::vector<double>& ends, int stage, int j) { return ends[static_cast<std::size_t>(stage) * m_ + j]; }
  double& end(std::vector<double>& ends, int r, int chunk, int j) {
    return end_at(ends, placement_.stage(r, chunk), j);
  }

  // When the input of rank r's next `kind` of `chunk` reaches it from the
  // stage before (a forward) or after (a backward): pending while that stage's
  // rank has not placed it; nullopt when rank r makes it itself (the turn of
  // the V, the loss) or nobody does (the first stage): no wait worth filling.
  std::optional<double> arrival(int r, ActionKind kind, int chunk) {
    const bool forward = kind == ActionKind::forward;
    const int from = placement_.stage(r, chunk) + (forward ? -1 : 1);
    if (from < 0 || from >= placement_.stage_count() || placement_.place(from).rank == r) return std::nullopt;
    const int j = forward ? rank(r).forwards[chunk] : rank(r).backwards[chunk];
    if (j >= m_) throw Unplaceable{};
    const double sent = end_at(forward ? forward_end_ : backward_end_, from, j);
    return sent == pending ? pending : sent + costs_.latency;
  }

  void advance(int r, double start, double cost) {
    Rank& rr = rank(r);
    if (rr.forwards[down] > 0) {
      rr.idle += start - rr.clock;
      worst_idle_ = std::max(worst_idle_, rr.idle);
    }
    rr.clock = start + cost;
  }

  void place(int r, ActionKind kind, int chunk) {
    Rank& rr = rank(r);
    const bool forward = kind == ActionKind::forward;
    const int j = forward ? rr.forwards[chunk] : rr.backwards[chunk];
    if (j >= m_) throw Unplaceable{};
    // What this rank must have run first: the forward of the same microbatch
    // and chunk, and at the V's turn, the other chunk's pass.
    const bool turn = r == p_ - 1 && chunk == (forward ? up : down);
    if (!forward && rr.forwards[chunk] <= j) throw Unplaceable{};
    if (turn && (forward ? rr.forwards[down] : rr.backwards[up]) <= j) throw Unplaceable{};
    if (forward && rr.memory + forward_memory > memory_limit()) throw Unplaceable{};
    const std::optional<double> input = arrival(r, kind, chunk);
    if (input && *input == pending) throw Unplaceable{};
    advance(r, std::max(rr.clock, input.value_or(0.0)), forward ? costs_.forward : costs_.backward_input);
    end(forward ? forward_end_ : backward_end_, r, chunk, j) = rr.clock;
    rr.actions.push_back(compute_action(kind, j, chunk));
    if (forward) {
      ++rr.forwards[chunk];
      rr.memory += forward_memory;
    } else {
      ++rr.backwards[chunk];
      rr.memory -= forward_memory / 2;
      rr.weights.emplace_back(chunk, j);
    }
  }

  void place_weight(int r) {
    Rank& rr = rank(r);
    const auto [chunk, j] = rr.weights.front();
    rr.weights.pop_front();
    advance(r, rr.clock, costs_.backward_weight);
    rr.memory -= forward_memory / 2;
    rr.actions.push_back(compute_action(ActionKind::backward_weight, j, chunk));
  }

  // The idle time rank r may still accept: up to the worst rank's so far, or
  // the approved share of the previous pass.
  double budget(int r) const {
    const double approved = approved_.empty() ? 0.0 : max_approved_ - approved_[static_cast<std::size_t>(r)];
    return std::max(worst_idle_, approved) - ranks_[static_cast<std::size_t>(r)].idle;
  }

  // Before rank r's next `kind` of `chunk`: W's while they fit the wait for
  // its input, and one more when waiting would exceed the budget.
  void fill_wait(int r, ActionKind kind, int chunk, bool beyond_fit) {
    const std::optional<double> input = arrival(r, kind, chunk);
    if (!input || *input == pending) return;
    Rank& rr = rank(r);
    while (!rr.weights.empty() && *input >= rr.clock + costs_.backward_weight) place_weight(r);
    if (beyond_fit && !rr.weights.empty() && *input - rr.clock > budget(r)) place_weight(r);
  }

  // Every rank starts a `down` forward in turn; then, from the last rank back,
  // each fills the time until its first `up` forward comes back with more
  // `down` forwards (and the ranks before it with as many, so that they feed
  // it), keeping memory for the microbatches still to turn; then each rank
  // catches up with the forwards of the rank before it, alternating chunks.
  void warm_up() {
    for (int r = 0; r < p_; ++r) place(r, ActionKind::forward, down);
    for (int r = p_ - 1; r >= 0; --r) {
      if (r < p_ - 1) {
        const double back = end(forward_end_, r + 1, up, 0) + costs_.latency;
        while (rank(r).memory + forward_memory * (2 + 2 * r) <= memory_limit() &&
               rank(r).clock + costs_.forward <= back && rank(r).forwards[down] < m_) {
          for (int q = 0; q <= r; ++q) place(q, ActionKind::forward, down);
        }
      }
      place(r, ActionKind::forward, up);
    }
    int chunk = down;
    for (int r = 1; r < p_; ++r) {
      const auto total = [this](int q) { return rank(q).forwards[down] + rank(q).forwards[up]; };
      while (total(r) < total(r - 1) ||
             (rank(r).forwards[up] <= rank(r - 1).forwards[up] && rank(r - 1).forwards[up] < m_)) {
        bool placed = false;
        for (int q = p_ - 1; q >= r; --q) {
          if (rank(q).forwards[chunk] < m_) {
            place(q, ActionKind::forward, chunk);
            placed = true;
          }
        }
        chunk = 1 - chunk;
        if (!placed && rank(r).forwards[chunk] >= m_) throw Unplaceable{};
      }
    }
  }

  // One B per rank: the `up` one while the `down` chunk has caught up with
  // it, else the `down` one once its gradient has been placed. The `down`
  // B's go from the last rank back (their gradients travel that way), then
  // the `up` B's from rank 0 on.
  void backwards_of_round() {
    std::vector<int> downs, ups;
    for (int r = 0; r < p_; ++r) {
      const Rank& rr = rank(r);
      bool take_down = false;
      if (rr.backwards[down] < rr.backwards[up]) {
        take_down =
            r == p_ - 1 || rr.backwards[up] >= m_ || end(backward_end_, r + 1, down, rr.backwards[down]) != pending;
      }
      (take_down ? downs : ups).push_back(r);
    }
    for (auto it = downs.rbegin(); it != downs.rend(); ++it) {
      fill_wait(*it, ActionKind::backward_input, down, true);
      place(*it, ActionKind::backward_input, down);
    }
    for (int r : ups) {
      fill_wait(r, ActionKind::backward_input, up, variant_.before_up_backward);
      place(r, ActionKind::backward_input, up);
    }
  }

  // One F per rank, from rank 0 on: the `down` one while the `up` chunk has
  // caught up with it, else the `up` one once its input has been placed, else
  // the `down` one once its input has; W's first when memory is full.
  void forwards_of_round() {
    for (int r = 0; r < p_; ++r) {
      Rank& rr = rank(r);
      if (rr.forwards[up] >= m_) continue;
      int chunk = -1;
      if (rr.forwards[up] >= rr.forwards[down]) {
        chunk = down;
      } else if (r == p_ - 1 || end(forward_end_, r + 1, up, rr.forwards[up]) != pending) {
        chunk = up;
      } else if (rr.forwards[down] < m_ && (r == 0 || end(forward_end_, r - 1, down, rr.forwards[down]) != pending)) {
        chunk = down;
      }
      if (chunk < 0) continue;
      while (rr.memory + forward_memory > memory_limit()) {
        if (rr.weights.empty()) throw Unplaceable{};
        place_weight(r);
      }
      fill_wait(r, ActionKind::forward, chunk, variant_.before_forward);
      place(r, ActionKind::forward, chunk);
    }
  }

  int p_, m_;
  Placement placement_;
  PlanningCosts costs_;
  Variant variant_;
  const std::vector<double>& approved_;
  double max_approved_;
  double worst_idle_ = 0.0;
  std::vector<double> forward_end_;   // per (stage, microbatch)
  std::vector<double> backward_end_;  // per (stage, microbatch)
  std::vector<Rank> ranks_;
};

struct Candidate {
  double worst_idle = std::numeric_limits<double>::infinity();
  std::vector<double> idle;
  std::vector<std::vector<Action>> plan;
};

std::optional<Candidate> try_pass(int p, int m, const PlanningCosts& costs, Variant variant,
                                  const std::vector<double>& approved) {
  VShapePass pass(p, m, costs, variant, approved);
  try {
    pass.run();
  } catch (const Unplaceable&) {
    return std::nullopt;
  }
  return Candidate{pass.worst_idle(), pass.idle(), pass.take_plan()};
}

}  // namespace

std::optional<std::vector<std::vector<Action>>> v_shape_plan(int p, int m, const PlanningCosts& costs) {
  constexpr int max_refinements = 32;
  std::optional<Candidate> best;
  for (const bool before_up_backward : {true, false}) {
    for (const bool before_forward : {true, false}) {
      const Variant variant{before_up_backward, before_forward};
      std::optional<Candidate> current = try_pass(p, m, costs, variant, {});
      // Each pass approves the idle time of the last; stop when it no longer shrinks the worst rank's.
      for (int k = 0; current && k < max_refinements; ++k) {
        std::optional<Candidate> next = try_pass(p, m, costs, variant, current->idle);
        if (!next || next->worst_idle >= current->worst_idle) break;
        current = std::move(next);
      }
      if (current && (!best || current->worst_idle < best->worst_idle)) best = std::move(current);
    }
  }
  if (!best) return std::nullopt;
  return std::move(best->plan);
}

}  // namespace kpipe::schedule::detail
