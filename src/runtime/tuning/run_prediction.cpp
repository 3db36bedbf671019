#include "kpipe/runtime/tuning/run_prediction.hpp"

#include "kpipe/runtime/data/data_source_kind.hpp"

namespace kpipe::runtime {

schedule::RunPlan charged_plan(const config::RunConfig& config, const std::vector<model::StageTraffic>& traffic) {
  schedule::RunPlan plan = schedule::run_plan(config);
  const int parts = model::boundary_parts(config.pipeline);
  for (const model::StageTraffic& stage : traffic) {
    plan.costs.communication.push_back({stage.output_bytes / parts, model::boundary_gathered(config.pipeline),
                                        stage.tensor_forward.bytes, static_cast<int>(stage.tensor_forward.calls),
                                        stage.tensor_backward.bytes, static_cast<int>(stage.tensor_backward.calls)});
  }
  return plan;
}

RunPrediction predict_run(const config::RunConfig& config) {
  RunPrediction prediction{model::TrainerSpec::from_config(config), {}, {}};
  check_data_source(config.data, prediction.spec);
  prediction.traffic = model::stage_traffic(config, prediction.spec.stages);
  prediction.plan = charged_plan(config, prediction.traffic);
  return prediction;
}

}  // namespace kpipe::runtime
