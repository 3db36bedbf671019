#pragma once
// The serving simulator (DESIGN.md §5b): microbatches of unequal work
// streaming through p stages, which is where the bubbles of pipelined
// inference come from. A driver decides what each microbatch holds (kpipe
// serve plugs its batching scheduler in), a cost model per stage prices it:
//
//   cost = fixed + per_token · tokens + per_context · attended
//
// with `attended` the Σ over the microbatch's tokens of the positions each
// attends to. Stages form a line and run microbatches in the order they
// were formed; a microbatch goes to the next stage `transfer` after it ends
// there, and its sampled tokens return from the last stage to the first
// after `transfer` too (p > 1). The first stage starts a microbatch when it
// is free and fewer than max_in_flight are in flight.
//
// Two bubbles. bubble() is what `kpipe serve` measures: per stage, the time
// between its first start and its last end not spent computing, summed over
// stages and divided by the time computing; it shows microbatches of unequal
// work and stalls of the batching, not the pipeline's fill and drain.
// pipeline_bubble() counts every stage idle from the first start on any
// stage to the last end on any, as the training plan does (and as the SVG's
// grey shows): (p-1)/m for m equal microbatches.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/schedule/timeline.hpp"

namespace kpipe::schedule {

struct ServeCosts {
  double fixed = 0.0;        // per microbatch
  double per_token = 0.0;    // per token in the microbatch
  double per_context = 0.0;  // per attended position

  double at(int tokens, std::int64_t attended) const {
    return fixed + per_token * tokens + per_context * static_cast<double>(attended);
  }
};

// One measured microbatch on one stage.
struct ServeSample {
  int tokens = 0;
  std::int64_t attended = 0;
  double seconds = 0.0;
};

// Least-squares costs of measured samples. Coefficients the samples cannot
// tell apart (every microbatch of one size, say) are 0: the fit then
// reproduces the samples with the others. Throws an input error without samples.
ServeCosts fit_serve_costs(const std::vector<ServeSample>& samples);

struct MicrobatchWork {
  int id = 0;
  int tokens = 0;
  std::int64_t attended = 0;
};

// What forms the microbatches: requests arrive, the first stage asks for work.
class ServeDriver {
 public:
  virtual ~ServeDriver() = default;
  // When the next request arrives; +infinity when every request has.
  virtual double next_arrival() const = 0;
  // Hands every request that has arrived by `now` to the scheduler.
  virtual void arrive(double now) = 0;
  // The next microbatch, or nullopt when nothing can run now.
  virtual std::optional<MicrobatchWork> next(double now) = 0;
  // Microbatch `id`'s sampled tokens reached the first stage at `now`.
  virtual void complete(int id, double now) = 0;
  // Every request served (or refused).
  virtual bool finished() const = 0;
};

struct ServeSetup {
  std::vector<ServeCosts> stages;  // one per stage, p = stages.size()
  double transfer = 0.0;           // latency of a stage-to-stage message
  int max_in_flight = 0;           // 0: p
};

struct ServedMicrobatch {
  MicrobatchWork work;
  std::vector<double> start, end;  // per stage
  double completed = 0.0;          // its tokens are back on the first stage
};

struct ServeStageStats {
  double busy = 0.0;
  double first_start = 0.0;
  double last_end = 0.0;
  double idle() const { return last_end - first_start - busy; }
};

struct ServeSimulation {
  std::vector<ServedMicrobatch> microbatches;  // in the order they were formed
  std::vector<ServeStageStats> stages;
  double makespan = 0.0;  // when the last microbatch completed
  double total_busy = 0.0;
  double total_idle = 0.0;
  double bubble() const { return total_busy > 0.0 ? total_idle / total_busy : 0.0; }
  Bubble pipeline_bubble() const;
};

// The statistics of microbatches with their start and end on each of
// `stages` stages, simulated or measured: per stage busy time, first start
// and last end, the totals and the makespan. Both bubbles come from here.
ServeSimulation summarize_serving(std::vector<ServedMicrobatch> microbatches, int stages);

// Runs the driver to its end. A driver that has nothing to run, nothing in
// flight and no arrival to wait for but is not finished is a runtime error.
ServeSimulation simulate_serving(const ServeSetup& setup, ServeDriver& driver);

// The simulation as a timeline the SVG renderer draws: one F box per
// microbatch and stage, labelled with its id. `name` heads the figure
// ("uniform serving"), `unit` is the costs' unit ("s"; empty: arbitrary).
Timeline serve_timeline(const ServeSimulation& simulation, const std::string& name, const std::string& unit);

}  // namespace kpipe::schedule
