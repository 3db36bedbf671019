#pragma once
// A measured `kpipe serve` run beside the serving simulator's prediction of
// it: per-stage costs fitted from the measured microbatches (fixed + per
// token + per attended position), the stage-to-stage latency from the
// shortest measured hand-over, and the same trace replayed through the same
// batching scheduler in simulated time. Where the two disagree, the cost
// model misses something the run did.

#include <vector>

#include "kpipe/runtime/serving/serve.hpp"
#include "kpipe/schedule/serve_simulate.hpp"

namespace kpipe::runtime {

// The measured run in the simulator's form: each microbatch's start and end
// on every stage, in the order they were formed; `stages` model stages.
schedule::ServeSimulation as_simulation(const ServeResult& measured, int stages);

struct ServePrediction {
  std::vector<schedule::ServeCosts> costs;  // per stage, fitted
  double transfer = 0.0;                    // seconds, stage to stage
  schedule::ServeSimulation simulation;
  double tokens_per_second = 0.0;
};

// Empty (no costs, an empty simulation) when no microbatch ran.
ServePrediction predict_serving(const std::vector<Request>& requests, const BatchLimits& limits,
                                const ServeResult& measured, int stages);

}  // namespace kpipe::runtime
