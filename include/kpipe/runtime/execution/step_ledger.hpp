#pragma once
// What every rank of a training run learns about each finished step: the
// global loss, its pipeline's measured bubble, the last compute end over the
// world (the data-parallel sums' exposed time) and the preemption signal any
// rank has received. Gathered by nonblocking collectives: a blocking one
// after every step would be a barrier, and with train.post_validation ranks
// must not wait for each other between steps (rank 0 of ZB-H2 starts the
// next step while the last rank still computes this one). Synchronous runs
// read a step's outcome at once; post-validated runs one step later, when
// every rank has long contributed it.

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "kpipe/comm/pending.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/runtime/execution/executor.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

struct StepOutcome {
  int step = 0;
  double step_start = 0.0;   // this rank's, in seconds of comm::wall_time()
  double seconds = 0.0;      // this rank's wall time of the step
  StepResult result;         // this rank's
  double loss = 0.0;         // the global mean loss
  MeasuredBubble bubble;     // of this rank's pipeline
  double compute_end = 0.0;  // the latest last compute of any rank, from its own step start
  int signal = 0;            // a preemption signal some rank had received by the step's end, or 0
};

class StepLedger {
 public:
  // `barrier`: a barrier ends each step (the synchronous optimizer step), so
  // outcomes are read at once; without one (train.post_validation) one step later.
  StepLedger(const comm::ProcessGrid& grid, const schedule::Schedule& schedule, bool barrier);

  // Starts gathering the outcome of `step`, which this rank finished.
  void add(int step, double step_start, double seconds, StepResult result, int signal);
  // The oldest outcome, completed, once it may be read (see the constructor); none otherwise.
  std::optional<StepOutcome> next();
  // Every outcome still gathering, completed, oldest first.
  std::vector<StepOutcome> flush();

 private:
  struct Gathering {
    StepOutcome outcome;
    std::unique_ptr<comm::PendingGather> pipeline;  // every pipeline rank's bubble terms
    std::unique_ptr<comm::PendingGather> world;     // every rank's {counted loss, signal, last compute end}
  };
  StepOutcome complete(Gathering& gathering) const;

  const comm::ProcessGrid& grid_;
  const schedule::Schedule& schedule_;
  bool barrier_;
  std::deque<Gathering> gathering_;
};

}  // namespace kpipe::runtime
