#include <fmt/format.h>

#include <array>
#include <deque>

#include "generators.hpp"

namespace kpipe::schedule::detail {

namespace {

// One rank's list as DualPipeV builds it: F's, BW's, F&B's, and B's whose W
// waits in a queue for a gap. Per chunk, microbatches go in ascending order
// in every kind, so weight gradients accumulate as in the sequential run.
class RankList {
 public:
  explicit RankList(std::vector<Action>& out) : out_(out) {}

  void forward(int chunk) { out_.push_back(compute_action(ActionKind::forward, next_forward_[chunk]++, chunk)); }
  // A BW, or with defer_weight a B whose W joins the queue.
  void backward(int chunk, bool defer_weight) {
    const int j = next_backward_[chunk]++;
    out_.push_back(compute_action(defer_weight ? ActionKind::backward_input : ActionKind::backward, j, chunk));
    if (defer_weight) weights_.push_back(compute_action(ActionKind::backward_weight, j, chunk));
  }
  void weight() {
    out_.push_back(weights_.front());
    weights_.pop_front();
  }
  void overlapped(int forward_chunk, int backward_chunk) {
    out_.push_back(overlapped_action(next_forward_[forward_chunk]++, forward_chunk, next_backward_[backward_chunk]++,
                                     backward_chunk));
  }

 private:
  std::vector<Action>& out_;
  std::array<int, 2> next_forward_{};
  std::array<int, 2> next_backward_{};
  std::deque<Action> weights_;
};

// DualPipeV (DeepSeek-V3 report §3.2.1; deepseek-ai/DualPipe): the V of
// zb-v, chunk 0 on the way down (model stage r), chunk 1 on the way up
// (stage 2p-1-r), in eight phases per rank:
//   1. 2(p-1-r) F's of chunk 0: the warm-up fills the way down
//   2. r+1 times F0 F1: the first microbatches turn and start up
//   3. p-1-r times B1 W F1: each W fills the wait for the next F1's input
//   4. m-2p+r+1 times F0&BW1, F1&BW0: the steady state, a forward of one
//      microbatch beside the backward of another (the last rank runs its first
//      F0 and BW1 apart: the F0 feeds its own chunk 1, whose F then starts sooner)
//   5. p-1-r times BW1, F1&BW0: the way down drains
//   6. r+1 times B1 B0: BW's, then from half-way (odd ranks before a B1, even
//      ranks before a B0) B's whose W's wait
//   7. p-1-r times W B0
//   8. r+1 W's: the queue empties
// Each rank idles (p-1)(F&B + BW - 3W) in a step; it stashes at most 2p+1
// microbatch-chunks (an F&B holds its F's before its BW frees one), 1F1B's p
// full-stage microbatches plus one chunk.
void dualpipe_v(const ScheduleSpec& spec, int rank, std::vector<Action>& out) {
  const int p = spec.p;
  const int later = p - 1 - rank;  // ranks after this one
  RankList list(out);
  for (int k = 0; k < 2 * later; ++k) list.forward(0);
  for (int k = 0; k <= rank; ++k) {
    list.forward(0);
    list.forward(1);
  }
  for (int k = 0; k < later; ++k) {
    list.backward(1, true);
    list.weight();
    list.forward(1);
  }
  for (int k = 0; k < spec.m - 2 * p + rank + 1; ++k) {
    if (k == 0 && later == 0) {
      list.forward(0);
      list.backward(1, false);
    } else {
      list.overlapped(0, 1);
    }
    list.overlapped(1, 0);
  }
  for (int k = 0; k < later; ++k) {
    list.backward(1, false);
    list.overlapped(1, 0);
  }
  bool defer = false;
  const int half = (rank + 1) / 2;
  for (int k = 0; k <= rank; ++k) {
    defer = defer || (k == half && rank % 2 == 1);
    list.backward(1, defer);
    defer = defer || (k == half && rank % 2 == 0);
    list.backward(0, defer);
  }
  for (int k = 0; k < later; ++k) {
    list.weight();
    list.backward(0, true);
  }
  for (int k = 0; k <= rank; ++k) list.weight();
}

constexpr char name[] = "dualpipe-v";

std::optional<std::string> check(const ShapeCheck& shape) {
  if (shape.v != 2) {
    return fmt::format(
        "the {} schedule places two model chunks per rank in a V; set pipeline.virtual_stages = 2 (now {})", name,
        shape.describe_virtual_stages());
  }
  if (shape.m < 2 * shape.p) {
    return fmt::format(
        "the {} schedule needs m >= 2p, its warm-up before the steady state, but m = {} microbatches < 2p = {}; "
        "raise train.global_batch to at least {} or lower train.microbatch_size",
        name, shape.m, 2 * shape.p, 2LL * shape.p * shape.microbatch_size * shape.data_parallel);
  }
  return std::nullopt;
}

// DeepSeek's (PP/2-1)(F&B + B - 3W) idle per rank, with PP = 2p model stages
// and their B the full backward (kpipe's BW); the costs are of one model
// stage, and a rank computes 2m of each.
std::optional<TheoreticalBubble> bubble(int p, int /*v*/, int m, const StageCosts& c) {
  const double full_backward = c.backward_input + c.backward_weight;
  const double overlapped = c.forward + full_backward - c.overlap * std::min(c.forward, full_backward);
  return bubble_from_ratio(
      (p - 1) * (overlapped + full_backward - 3 * c.backward_weight) / (2.0 * m * (c.forward + full_backward)),
      "(p-1)(F&B+BW-3W)/(2m(F+B+W))");
}

}  // namespace

const ScheduleInfo& dualpipe_v_info() {
  static const ScheduleInfo info{
      name,  "DeepSeek's DualPipeV: a V of two chunks per rank, one microbatch's F overlapped with another's BW",
      true,  per_rank<dualpipe_v>,
      check, v_placement,
      bubble};
  return info;
}

}  // namespace kpipe::schedule::detail
