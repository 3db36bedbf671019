#pragma once
// The discrete-event simulator: runs a validated schedule the way the
// executor will (ranks in parallel, each through its list in order; sends do
// not block, a receive waits for its message) with modelled costs.
//
// Cost model, in arbitrary time units:
//   F, B, W        forward / backward_input / backward_weight, of stages[stage]
//                  when per-stage costs are given (e.g. measured ones)
//   BW             B + W
//   F&B            F + BW of its halves' stages, less `overlap` times the
//                  shorter of the two: 0 when they run one after the other
//                  (host backends), 1 when two streams hide it entirely
//   transfer       comm_latency + bytes / comm_bandwidth (bandwidth 0:
//                  latency only); the link, not the rank, is busy. bytes:
//                  bytes_per_transfer, or with per-stage communication the
//                  sender's share of that boundary tensor, plus as much again
//                  for the receiver's all-gather with scatter/gather
//   sums           per-stage communication: each of the tensor group's sums
//                  in an F or B costs comm_latency + its bytes / comm_bandwidth,
//                  added to the action's compute time (the rank is busy)
//   SEND_*         send_time on the rank (posting it; 0 unless calibrated)
//   RECV_*         receive_time on the rank once the message has arrived
//                  (completing it; 0 unless calibrated); idle, not busy
//   other actions  no time (a send is posted, LOSS is folded into F, the step
//                  actions are outside the pipeline)
// A rank is busy during compute actions and idle otherwise, including the
// time after it finishes and before the slowest rank does.
//
// With a Variation (calibrated costs) every compute, transfer and receive
// time is its cost times a factor drawn from measured factors (mean 1),
// seeded, so one simulation is one plausible step: waits between ranks add
// up the slow draws the way a real step does, which mean costs alone miss.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

// What the compute of one model stage costs.
struct StageCosts {
  double forward = 1.0;          // one F
  double backward_input = 1.0;   // one B
  double backward_weight = 1.0;  // one W
  double overlap = 0.0;          // of an F&B on this stage's rank: the share of its shorter half hidden (0..1)
};

// What one rank of a model stage communicates besides its messages' payload
// per microbatch (runtime::charged_plan fills it from the model's layers).
struct StageCommunication {
  std::int64_t output_bytes = 0;  // its share of the boundary tensor after the stage, and of that tensor's gradient
  bool gathered = false;          // scatter/gather: a receiver all-gathers the shares (one collective more)
  std::int64_t forward_sum_bytes = 0;  // the tensor group's sums in one F: bytes each rank contributes
  int forward_sums = 0;
  std::int64_t backward_sum_bytes = 0;  // in one B (recomputation included); W sums nothing
  int backward_sums = 0;
};

// Measured spread of the costs: factors of their mean, each equally likely.
struct Variation {
  std::vector<double> compute;   // F, B, W, BW
  std::vector<double> transfer;  // the link's delay of a message
  std::vector<double> receive;   // a rank's time completing a receive
  std::uint64_t seed = 1;
};

struct CostModel {
  double forward = 1.0;            // one F of one model stage
  double backward_input = 1.0;     // one B
  double backward_weight = 1.0;    // one W
  double overlap = 0.0;            // an F&B hides this share of its shorter half (0..1)
  std::vector<StageCosts> stages;  // one entry per model stage (p·v) replacing the four above, or empty
  double comm_latency = 0.0;
  double comm_bandwidth = 0.0;  // bytes per time unit; 0 means transfers cost latency only
  std::int64_t bytes_per_transfer = 0;
  // One entry per model stage (p·v): each message's bytes and each F's and B's
  // tensor-group sums; empty: every message is bytes_per_transfer, no sums.
  std::vector<StageCommunication> communication;
  // A rank's OPTIMIZER_STEP with its gradient sums: 0 where a barrier ends
  // the step (it is after the makespan); what a post-validated step's period includes.
  double optimizer_step = 0.0;
  double send_time = 0.0;              // a rank's own time in each SEND_*
  double receive_time = 0.0;           // a rank's own time in each RECV_* after its message arrived
  int max_in_flight = 0;               // most stashed microbatches a rank may hold; 0 is unlimited
  std::optional<Variation> variation;  // none: every action takes its cost exactly

  // F, B, W or BW of model stage `stage`: its compute and its tensor-group sums.
  double compute_time(ActionKind kind, int stage) const;
  // An F&B of `rank` (`overlapped` holds its halves).
  double overlapped_time(const Placement& placement, int rank, const Action& overlapped) const;
  // A SEND_ACT or SEND_GRAD of model stage `stage`: its bytes, and its delay on the link.
  std::int64_t message_bytes(ActionKind kind, int stage) const;
  double transfer_time(ActionKind kind, int stage) const;
};

// The pipeline bubble, in both of its usual normalisations.
struct Bubble {
  double idle_over_useful = 0.0;  // Σ idle / Σ busy: (p-1)/m for 1F1B
  double idle_over_total = 0.0;   // Σ idle / (p · makespan): (p-1)/(m+p-1) for 1F1B
};

struct RankStats {
  double busy = 0.0;
  double idle = 0.0;     // makespan - busy
  double span = 0.0;     // from the start of its first compute to the end of its last
  int peak_stashed = 0;  // most (microbatch, chunk) activations held between F and B/BW
  int peak_held = 0;     // most (microbatch, chunk) activations held between F and W/BW (peak_held)
  std::int64_t bytes_sent = 0;
};

struct SimulationResult {
  double makespan = 0.0;
  double last_compute_end = 0.0;  // when the last F, B, W or BW on any rank ends (what a measured makespan counts)
  double total_busy = 0.0;
  double total_idle = 0.0;
  std::int64_t transfers = 0;
  std::int64_t bytes_moved = 0;
  std::vector<RankStats> ranks;
  // end[r][i]: when rank r finished action i. Actions run back to back, so
  // action i started when action i-1 ended (at 0 for the first). Empty when
  // simulated with Record::summary. With several steps, i counts on through
  // them.
  std::vector<std::vector<double>> end;
  // step_end[r][k]: when rank r finished its actions of step k (one entry per
  // step simulated, whatever the Record).
  std::vector<std::vector<double>> step_end;

  double start(int rank, std::size_t index) const { return index == 0 ? 0.0 : end[rank][index - 1]; }
  // Every rank idle for the whole makespan less its busy time.
  Bubble bubble() const;
  // Every rank idle only within its span: the ramp before its first compute
  // and the drain after its last do not count, which is the bubble the
  // zero-bubble schedules are built to remove (the Zero Bubble paper's
  // measure). (p-1)/(2m) for 1F1B, half its makespan bubble.
  Bubble span_bubble() const;
};

// What simulate() keeps: the time of every action (what the timelines draw),
// or only the summary, which saves 8 bytes per action on large plans.
enum class Record { every_action, summary };

// Simulates a schedule that passed validate(), at least with Checks::per_rank:
// a message without its receive or a deadlock across ranks is then reported
// as validate() would. A schedule that needs more than max_in_flight stashed
// microbatches on some rank is an input error naming it.
//
// steps > 1 (a training schedule only): the action lists run that many times
// back to back, each rank starting step k+1 as soon as its own step k ends
// (train.post_validation), in the memory of one step.
SimulationResult simulate(const Schedule& schedule, const CostModel& costs, Record record = Record::every_action,
                          int steps = 1);

// The bubble of steps that follow each other without a barrier
// (train.post_validation: each rank starts the next step as soon as its own
// ends): `steps` steps simulated back to back, the slowest rank's period
// between the ends of its last two, less the optimizer step, against every
// rank's busy time per step. At or below the makespan bubble; the span bubble
// where the stages balance.
Bubble post_validated_bubble(const Schedule& schedule, const CostModel& costs, int steps = 4);

// The textbook bubble of the named schedule with these costs, and its formula
// for labels; nullopt for schedules without one (hand-written ones).
struct TheoreticalBubble {
  Bubble bubble;
  std::string formula;  // idle/useful, e.g. "(p-1)/m"
};
std::optional<TheoreticalBubble> theoretical_bubble(const Schedule& schedule, const CostModel& costs);

}  // namespace kpipe::schedule
