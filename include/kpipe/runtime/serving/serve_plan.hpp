#pragma once
// `kpipe plan DECK requests=FILE`: the serving simulator on a request trace
// without any compute. Both batching policies replay the trace through the
// same scheduler kpipe serve uses, priced by a FLOP model of each stage or by
// the stage costs a `kpipe serve --json` run fitted, so the bubbles that
// unequal microbatches cause show before a run (DESIGN.md §5b).

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/serving/serve_scheduler.hpp"
#include "kpipe/schedule/serve_simulate.hpp"

namespace kpipe::runtime {

// One batching policy's replay of the trace.
struct PolicyPlan {
  std::string batching;
  schedule::ServeSimulation simulation;
  double first_token_p50 = 0.0;
  std::int64_t tokens = 0;
};

struct ServePlan {
  std::string costs;  // where the stage costs come from
  int stages = 0;     // model stages
  int kv_blocks = 0;  // per stage
  // Bytes of K and V one token takes per attention layer on a tensor rank:
  // 1/t of the key/value heads (heads / kv_heads fewer with grouped-query
  // attention).
  std::size_t kv_token_bytes = 0;
  std::size_t requests = 0;
  BatchLimits limits;
  std::vector<PolicyPlan> policies;  // "request", then "uniform"
};

// `costs_path`: a `kpipe serve --json` summary, or empty for the FLOP model.
ServePlan plan_serving(const config::RunConfig& config, const std::string& requests_path,
                       const std::string& costs_path);

}  // namespace kpipe::runtime
