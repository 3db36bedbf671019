#include <fmt/format.h>

#include <limits>
#include <memory>

#include "generators.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::schedule::detail {

namespace {

constexpr int never = std::numeric_limits<int>::max();

struct RankState {
  std::vector<int> next_forward, next_backward, next_weight;  // per chunk: the next microbatch of each kind
  int stashed = 0;
  std::vector<Action> actions;
};

// The candidate a rank prefers: the oldest microbatch, then the later model stage.
struct Pick {
  int chunk = -1;
  int microbatch = never;
  int stage = -1;
  void offer(int c, int j, int s) {
    if (j < microbatch || (j == microbatch && s > stage)) *this = {c, j, s};
  }
};

class Planner {
 public:
  Planner(const ScheduleSpec& spec, const Placement& placement, std::vector<int> stash_limit)
      : m_(spec.m),
        placement_(placement),
        stash_limit_(std::move(stash_limit)),
        forward_done_(static_cast<std::size_t>(placement.stage_count()) * spec.m, never),
        backward_done_(forward_done_.size(), never),
        ranks_(static_cast<std::size_t>(spec.p)) {
    const int v = placement.v();
    for (auto& rank : ranks_) {
      rank.next_forward.assign(v, 0);
      rank.next_backward.assign(v, 0);
      rank.next_weight.assign(v, 0);
      rank.actions.reserve(3 * static_cast<std::size_t>(v) * spec.m);
    }
  }

  std::vector<std::vector<Action>> run() {
    std::int64_t remaining = 3 * static_cast<std::int64_t>(placement_.stage_count()) * m_;
    for (int t = 0; remaining > 0; ++t) {
      int started = 0;
      for (int r = 0; r < placement_.p(); ++r) started += step(r, t) ? 1 : 0;
      // Every action takes one unit, so a step in which nobody starts repeats forever.
      if (started == 0) {
        throw runtime_error(fmt::format("the zero-bubble planner stalled at time {} with p = {}, v = {}, m = {}", t,
                                        placement_.p(), placement_.v(), m_));
      }
      remaining -= started;
    }
    std::vector<std::vector<Action>> plan;
    plan.reserve(ranks_.size());
    for (auto& rank : ranks_) plan.push_back(std::move(rank.actions));
    return plan;
  }

 private:
  int& forward_done(int stage, int j) { return forward_done_[static_cast<std::size_t>(stage) * m_ + j]; }
  int& backward_done(int stage, int j) { return backward_done_[static_cast<std::size_t>(stage) * m_ + j]; }

  // Stash slots chunk c must leave free: one per chunk of this rank that holds a later stage.
  int reserved(int rank, int chunk) const {
    int later = 0;
    for (int c = 0; c < placement_.v(); ++c) later += placement_.stage(rank, c) > placement_.stage(rank, chunk);
    return later;
  }

  // Starts rank r's next action at time t, if it has one it can start.
  bool step(int r, int t) {
    RankState& rank = ranks_[r];
    const int last = placement_.stage_count() - 1;
    Pick backward, forward, weight;
    for (int c = 0; c < placement_.v(); ++c) {
      const int s = placement_.stage(r, c);
      const int jb = rank.next_backward[c];
      if (jb < rank.next_forward[c] && forward_done(s, jb) <= t && (s == last || backward_done(s + 1, jb) <= t)) {
        backward.offer(c, jb, s);
      }
      const int jf = rank.next_forward[c];
      if (jf < m_ && (s == 0 || forward_done(s - 1, jf) <= t) &&
          rank.stashed + reserved(r, c) < stash_limit_[static_cast<std::size_t>(r)]) {
        forward.offer(c, jf, s);
      }
      const int jw = rank.next_weight[c];
      if (jw < rank.next_backward[c] && backward_done(s, jw) <= t) weight.offer(c, jw, s);
    }
    if (backward.chunk >= 0) {
      start(rank, ActionKind::backward_input, backward, backward_done(backward.stage, backward.microbatch), t);
      --rank.stashed;
      ++rank.next_backward[backward.chunk];
    } else if (forward.chunk >= 0) {
      start(rank, ActionKind::forward, forward, forward_done(forward.stage, forward.microbatch), t);
      ++rank.stashed;
      ++rank.next_forward[forward.chunk];
    } else if (weight.chunk >= 0) {
      int ignored = 0;
      start(rank, ActionKind::backward_weight, weight, ignored, t);
      ++rank.next_weight[weight.chunk];
    } else {
      return false;
    }
    return true;
  }

  // Results become visible to actions that start after this one ends.
  static void start(RankState& rank, ActionKind kind, const Pick& pick, int& done_at, int t) {
    rank.actions.push_back(compute_action(kind, pick.microbatch, pick.chunk));
    done_at = t + 1;
  }

  int m_;
  const Placement& placement_;
  std::vector<int> stash_limit_;
  std::vector<int> forward_done_;   // per (stage, microbatch): when its F ended
  std::vector<int> backward_done_;  // per (stage, microbatch): when its B ended
  std::vector<RankState> ranks_;
};

}  // namespace

std::vector<std::vector<Action>> zero_bubble_plan(const ScheduleSpec& spec, const Placement& placement,
                                                  std::vector<int> stash_limit) {
  return Planner(spec, placement, std::move(stash_limit)).run();
}

RankGenerator hand_out(std::vector<std::vector<Action>> plan) {
  auto shared = std::make_shared<std::vector<std::vector<Action>>>(std::move(plan));
  return [shared](int rank, std::vector<Action>& out) {
    auto& actions = (*shared)[static_cast<std::size_t>(rank)];
    out.insert(out.end(), actions.begin(), actions.end());
    std::vector<Action>().swap(actions);
  };
}

}  // namespace kpipe::schedule::detail
