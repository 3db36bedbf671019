#pragma once
// The run plan with the model's communication charged (DESIGN.md §2): what
// `kpipe plan` simulates and `kpipe run` predicts, the same way.

#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/traffic.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/schedule/run_plan.hpp"

namespace kpipe::runtime {

// schedule::run_plan with each model stage's communication, `traffic`
// (model::stage_traffic of the run's partition): messages as wide as the real
// boundary tensors, 1/t of them with scatter/gather and the receiver's
// all-gather, and with t > 1 the tensor group's sums in every F and B.
schedule::RunPlan charged_plan(const config::RunConfig& config, const std::vector<model::StageTraffic>& traffic);

// What a run of `config` is predicted to do, resolved once for every report
// of it: the partition (the model's specs, every layer kind looked up), each
// stage's traffic, and the plan with that traffic charged. The data source
// is checked as a run would before reading any data (check_data_source).
struct RunPrediction {
  model::TrainerSpec spec;
  std::vector<model::StageTraffic> traffic;
  schedule::RunPlan plan;
};
RunPrediction predict_run(const config::RunConfig& config);

}  // namespace kpipe::runtime
