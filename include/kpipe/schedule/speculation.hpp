#pragma once
// What a rank may run of a step before the previous step's update is known
// to stand (train.post_validation): the head of its action list up to its
// first backward work — F, LOSS and activation messages — which needs
// weights but changes none. A rank that finishes a step early (rank 0 of a
// ZB-H2 parallelogram) thus starts the next one while the last ranks are
// still computing, instead of waiting for the global check. Where the check
// then rolls the update back, every rank abandons its head and runs the step
// again. For that each rank must know which of its receives the other heads
// sent into (it drops those its own head did not consume), and no head may
// consume a message sent after its sender's head (the re-run would send it
// again): heads are cut short where that would happen.

#include <cstddef>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

struct SpeculativeHead {
  std::size_t end = 0;  // actions [0, end) of the rank may run before the previous update stands
  // Receives at or past `end` whose messages the senders' heads send: an
  // abandoned head leaves them to receive and drop. In list order.
  std::vector<std::size_t> drained;
};

// One per rank of a training schedule that passed the validator.
std::vector<SpeculativeHead> speculative_heads(const Schedule& schedule);

}  // namespace kpipe::schedule
