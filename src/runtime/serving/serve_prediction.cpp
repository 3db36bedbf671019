#include "kpipe/runtime/serving/serve_prediction.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "kpipe/runtime/serving/serve_replay.hpp"

namespace kpipe::runtime {

schedule::ServeSimulation as_simulation(const ServeResult& measured, int stages) {
  std::map<int, schedule::ServedMicrobatch> by_id;
  for (const StageWork& w : measured.work) {
    schedule::ServedMicrobatch& m = by_id[w.microbatch];
    m.work = {w.microbatch, w.tokens, w.attended};
    m.start.resize(static_cast<std::size_t>(stages));
    m.end.resize(static_cast<std::size_t>(stages));
    m.start[static_cast<std::size_t>(w.stage)] = w.start;
    m.end[static_cast<std::size_t>(w.stage)] = w.end;
    m.completed = std::max(m.completed, w.end);
  }
  std::vector<schedule::ServedMicrobatch> microbatches;
  for (auto& [id, m] : by_id) microbatches.push_back(std::move(m));
  return schedule::summarize_serving(std::move(microbatches), stages);
}

ServePrediction predict_serving(const std::vector<Request>& requests, const BatchLimits& limits,
                                const ServeResult& measured, int stages) {
  const schedule::ServeSimulation run = as_simulation(measured, stages);
  ServePrediction prediction;
  if (run.microbatches.empty()) return prediction;  // nothing ran: nothing to fit or to predict
  std::vector<std::vector<schedule::ServeSample>> samples(static_cast<std::size_t>(stages));
  prediction.transfer = std::numeric_limits<double>::infinity();
  for (const schedule::ServedMicrobatch& m : run.microbatches) {
    for (int s = 0; s < stages; ++s) {
      samples[static_cast<std::size_t>(s)].push_back(
          {m.work.tokens, m.work.attended, m.end[static_cast<std::size_t>(s)] - m.start[static_cast<std::size_t>(s)]});
      if (s > 0) {
        prediction.transfer = std::min(prediction.transfer,
                                       m.start[static_cast<std::size_t>(s)] - m.end[static_cast<std::size_t>(s - 1)]);
      }
    }
  }
  if (!(prediction.transfer >= 0.0) || prediction.transfer == std::numeric_limits<double>::infinity()) {
    prediction.transfer = 0.0;
  }
  for (const auto& stage : samples) prediction.costs.push_back(schedule::fit_serve_costs(stage));

  ReplayDriver driver(requests, limits);
  schedule::ServeSetup setup;
  setup.stages = prediction.costs;
  setup.transfer = prediction.transfer;
  setup.max_in_flight = limits.pipeline_depth;
  prediction.simulation = schedule::simulate_serving(setup, driver);
  std::int64_t tokens = 0;
  for (const ServedRequest& r : measured.requests) tokens += static_cast<std::int64_t>(r.generated.size());
  prediction.tokens_per_second = static_cast<double>(tokens) / std::max(prediction.simulation.makespan, 1e-12);
  return prediction;
}

}  // namespace kpipe::runtime
