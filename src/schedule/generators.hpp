#pragma once
// The generators behind generate(): each appends one rank's compute actions,
// in execution order, to `out`. Adding a schedule means adding one of these
// and one line in generate.cpp's table.

#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule::detail {

void gpipe(const ScheduleSpec& spec, int rank, std::vector<Action>& out);
void one_f_one_b(const ScheduleSpec& spec, int rank, std::vector<Action>& out);
void interleaved(const ScheduleSpec& spec, int rank, std::vector<Action>& out);
void zb_h1(const ScheduleSpec& spec, int rank, std::vector<Action>& out);
void forward_only(const ScheduleSpec& spec, int rank, std::vector<Action>& out);

// Megatron's one-forward-one-backward order over `count` (virtual)
// microbatches: `warmup` forwards, then one forward and one backward in turn,
// then the remaining backwards. forward_at(k) and backward_at(k) are the k-th
// forward and backward action.
template <class ForwardAt, class BackwardAt>
void append_one_f_one_b(std::vector<Action>& out, int count, int warmup, ForwardAt forward_at, BackwardAt backward_at) {
  for (int k = 0; k < warmup; ++k) out.push_back(forward_at(k));
  for (int k = warmup; k < count; ++k) {
    out.push_back(forward_at(k));
    out.push_back(backward_at(k - warmup));
  }
  for (int k = count - warmup; k < count; ++k) out.push_back(backward_at(k));
}

}  // namespace kpipe::schedule::detail
