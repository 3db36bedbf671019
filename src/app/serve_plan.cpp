// `kpipe plan DECK requests=FILE`: the serving simulator on a request trace
// without any compute. Both batching policies replay the trace through the
// same scheduler kpipe serve uses, priced by a FLOP model of each stage or by
// the stage costs a `kpipe serve --json` run fitted (--costs), so the bubbles
// that unequal microbatches cause show before a run (DESIGN.md §5b).

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/runtime/serve.hpp"
#include "kpipe/runtime/serve_replay.hpp"
#include "kpipe/runtime/token_source.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "output_file.hpp"

namespace kpipe::app {

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

struct PolicyPlan {
  std::string batching;
  schedule::ServeSimulation simulation;
  double first_token_p50 = 0.0;
  std::int64_t tokens = 0;
};

PolicyPlan simulate(const std::string& batching, const std::vector<runtime::Request>& requests,
                    runtime::BatchLimits limits, const StageCostModel& costs) {
  limits.policy = batching == "request" ? config::Batching::request : config::Batching::uniform;
  runtime::ReplayDriver driver(requests, limits);
  schedule::ServeSetup setup{costs.stages, costs.transfer, limits.pipeline_depth};
  PolicyPlan plan{batching, schedule::simulate_serving(setup, driver)};
  std::vector<double> first;
  for (const runtime::RequestTimes& t : driver.times()) {
    if (t.first_token >= 0) first.push_back(t.first_token - t.arrival);
  }
  plan.first_token_p50 = runtime::percentile(first, 0.5);
  for (const runtime::Request& r : requests) plan.tokens += r.max_new_tokens;
  return plan;
}

}  // namespace

int serve_plan_command(const LoadedDeck& loaded, const PlanOptions& options) {
  const config::RunConfig& config = loaded.config;
  if (config.model.kind != config::ModelKind::transformer) {
    throw input_error(fmt::format("{} has model.kind = \"{}\"; a serving plan (requests=FILE) needs a transformer deck",
                                  options.deck.path, loaded.deck.string("model.kind")));
  }
  if (!options.trace_path.empty()) {
    throw input_error("--trace draws a training step; a serving plan (requests=FILE) writes --svg and --json");
  }
  if (!options.costs_path.empty()) protect_input(options.costs_path);
  protect_input(options.requests_path);
  require_writable(options.svg_path, "--svg");
  require_writable(options.json_path, "--json");
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const schedule::RunPlan plan = schedule::run_plan(config);
  const int stages = plan.spec.p * plan.spec.v;
  const StageCostModel costs =
      options.costs_path.empty() ? flop_model(spec) : measured_costs(options.costs_path, stages);
  const auto vocabulary = runtime::load_vocabulary(config.data, spec);
  const runtime::Trace trace = runtime::read_request_trace(options.requests_path, vocabulary, spec.model.context);
  if (trace.error) throw input_error(*trace.error);
  const int blocks = runtime::kv_cache_blocks<float>(spec, config.inference);
  const runtime::BatchLimits limits = runtime::batch_limits(config.inference, blocks, spec.model.context, plan.spec.p);

  const std::string deck_batching = loaded.deck.string("inference.batching");
  std::vector<PolicyPlan> plans;
  for (const std::string batching : {"request", "uniform"}) {
    plans.push_back(simulate(batching, trace.requests, limits, costs));
  }
  log::info(
      "serve plan: {} requests from {} on {} stages, token budget {}, at most {} running, {} KV blocks of {} "
      "tokens per stage",
      trace.requests.size(), options.requests_path, stages, limits.token_budget, limits.max_sequences, blocks,
      limits.block_tokens);
  log::info("costs: {}", costs.description);
  log::info("  {:<10} {:>12} {:>10} {:>8} {:>10} {:>12}", "batching", "microbatches", "makespan s", "bubble",
            "tokens/s", "TTFT p50 ms");
  for (const PolicyPlan& p : plans) {
    log::info("{} {:<10} {:>12} {:>10.3f} {:>8.3f} {:>10.0f} {:>12.2f}", p.batching == deck_batching ? '*' : ' ',
              p.batching, p.simulation.microbatches.size(), p.simulation.makespan, p.simulation.bubble(),
              p.tokens / std::max(p.simulation.makespan, 1e-300), 1e3 * p.first_token_p50);
  }
  log::info("(* the deck's inference.batching; bubble = idle/busy, each stage from its first compute to its last)");

  if (log::is_root()) {
    write_output(options.svg_path, "--svg", [&](std::ostream& out) {
      std::vector<schedule::Timeline> panels;
      for (const PolicyPlan& p : plans) {
        panels.push_back(schedule::serve_timeline(p.simulation, p.batching, "s"));
        panels.back().label = fmt::format("{} batching, simulated", p.batching);
      }
      schedule::write_svg_timelines(out, panels);
    });
    write_output(options.json_path, "--json", [&](std::ostream& out) {
      nlohmann::json policies = nlohmann::json::array();
      for (const PolicyPlan& p : plans) {
        policies.push_back({{"batching", p.batching},
                            {"microbatches", p.simulation.microbatches.size()},
                            {"makespan", p.simulation.makespan},
                            {"bubble", p.simulation.bubble()},
                            {"tokens_per_second", p.tokens / std::max(p.simulation.makespan, 1e-300)},
                            {"time_to_first_token_p50", p.first_token_p50}});
      }
      const nlohmann::json json = {
          {"command", "plan"},          {"deck", options.deck.path}, {"requests_file", options.requests_path},
          {"costs", costs.description}, {"stages", stages},          {"policies", policies}};
      out << json.dump(2) << '\n';
    });
  }
  return 0;
}

}  // namespace kpipe::app
