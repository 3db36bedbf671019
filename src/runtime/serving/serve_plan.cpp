#include "kpipe/runtime/serving/serve_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"
#include "kpipe/runtime/serving/serve.hpp"
#include "kpipe/runtime/serving/serve_replay.hpp"
#include "kpipe/schedule/run_plan.hpp"

namespace kpipe::runtime {

namespace {

struct StageCostModel {
  std::vector<schedule::ServeCosts> stages;  // seconds
  double transfer = 0.0;                     // seconds
  std::string description;                   // where they come from
};

// The rate the FLOP model assumes: about what one core of the development
// machine reaches on these small GEMMs. Arrivals are in seconds, so the
// costs must be too; measured costs (--costs) replace the assumption.
constexpr double assumed_flops_per_second = 50e9;

// Forward FLOPs of each model stage, split into a part per token (the
// projections, MLP, head) and a part per attended position (Q·Kᵀ and P·V:
// 4·dim per position and decoder block), at the assumed rate.
StageCostModel flop_model(const model::TrainerSpec& spec) {
  const auto layers = spec.model.layers();
  const double T = spec.model.context, d = spec.model.dim;
  const double seconds = 1.0 / assumed_flops_per_second;
  StageCostModel model{{},
                       0.0,
                       fmt::format("each stage's forward FLOPs at an assumed {:.0f} GFLOP/s (--costs SERVE.json for "
                                   "the costs a kpipe serve run measured)",
                                   assumed_flops_per_second / 1e9)};
  for (const model::LayerRange& stage : spec.stages) {
    schedule::ServeCosts costs;
    for (int l = stage.first; l < stage.end(); ++l) {
      const model::LayerSpec& layer = layers.at(static_cast<std::size_t>(l));
      const bool block = layer.kind->attention_layers > 0;
      const double attention = block ? 2.0 * T * T * d : 0.0;  // the block's causal attention over T positions
      costs.per_token += (static_cast<double>(layer.flops) - attention) / T * seconds;
      if (block) costs.per_context += 4.0 * d * seconds;
    }
    model.stages.push_back(costs);
  }
  return model;
}

// The stage costs and link latency a `kpipe serve --json` run fitted.
StageCostModel measured_costs(const std::string& path, int stages) {
  const std::string text = read_input_file(
      path, {"--costs file", limits::summary_json_bytes, "; give the --json file of a kpipe serve run"});
  if (json_depth(text) > limits::json_depth) {
    throw input_error(fmt::format("--costs {} nests JSON more than {} deep; give the --json file of a kpipe serve run",
                                  printable(path), limits::json_depth));
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(fmt::format("--costs {} is not JSON ({}); give the --json file of a kpipe serve run",
                                  printable(path), e.what()));
  }
  if (!json.contains("stage_costs")) {
    throw input_error(
        fmt::format("--costs {} holds no 'stage_costs'; for a serving plan give the --json file of a "
                    "kpipe serve run",
                    printable(path)));
  }
  StageCostModel model{{}, json.value("transfer_seconds", 0.0), "fitted by the kpipe serve run " + path};
  for (const auto& stage : json.at("stage_costs")) {
    model.stages.push_back(
        {stage.at("fixed").get<double>(), stage.at("per_token").get<double>(), stage.at("per_context").get<double>()});
  }
  if (static_cast<int>(model.stages.size()) != stages) {
    throw input_error(
        fmt::format("--costs {} has costs of {} stages, but the deck has {}; serve this pipeline shape "
                    "to measure them",
                    printable(path), model.stages.size(), stages));
  }
  return model;
}

PolicyPlan simulate_policy(const std::string& batching, const std::vector<Request>& requests, BatchLimits limits,
                           const StageCostModel& costs) {
  limits.policy = batching == "request" ? config::Batching::request : config::Batching::uniform;
  ReplayDriver driver(requests, limits);
  schedule::ServeSetup setup{costs.stages, costs.transfer, limits.pipeline_depth};
  PolicyPlan plan{batching, schedule::simulate_serving(setup, driver)};
  std::vector<double> first;
  for (const RequestTimes& t : driver.times()) {
    if (t.first_token >= 0) first.push_back(t.first_token - t.arrival);
  }
  plan.first_token_p50 = percentile(first, 0.5);
  for (const Request& r : requests) plan.tokens += r.max_new_tokens;
  return plan;
}

}  // namespace

ServePlan plan_serving(const config::RunConfig& config, const std::string& requests_path,
                       const std::string& costs_path) {
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const schedule::RunPlan plan = schedule::run_plan(config);
  ServePlan serving;
  serving.stages = plan.spec.p * plan.spec.v;
  const StageCostModel costs = costs_path.empty() ? flop_model(spec) : measured_costs(costs_path, serving.stages);
  const auto tokenizer = load_tokenizer(config.data, spec.model.vocab);
  const Trace trace = read_request_trace(requests_path, *tokenizer, spec.model.context);
  if (trace.error) throw input_error(*trace.error);
  serving.costs = costs.description;
  serving.requests = trace.requests.size();
  serving.kv_blocks = kv_cache_blocks<float>(spec, config.inference, config.pipeline.tensor_parallel);
  serving.kv_token_bytes = model::kv_block_bytes(1, model::kv_width(spec.model, config.pipeline.tensor_parallel), 1,
                                                 kernels::stored_dtype<float>(spec.stage.kernels.precision));
  serving.limits = batch_limits(config.inference, serving.kv_blocks, spec.model.context, plan.spec.p);
  for (const std::string batching : {"request", "uniform"}) {
    serving.policies.push_back(simulate_policy(batching, trace.requests, serving.limits, costs));
  }
  return serving;
}

}  // namespace kpipe::runtime
