// `kpipe plan DECK requests=FILE`: prints and writes the serving plan that
// runtime::plan_serving simulates for both batching policies.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/serving/serve_plan.hpp"
#include "kpipe/schedule/render.hpp"

namespace kpipe::app {

int serve_plan_command(const LoadedDeck& loaded, const PlanOptions& options) {
  const config::RunConfig& config = loaded.config;
  if (!config.model.token_sequences()) {
    throw input_error(fmt::format(
        "{} has model.kind = \"{}\"; a serving plan (requests=FILE) needs a language model: model.kind = {}",
        options.deck.path, config.model.kind, config::token_family_choices()));
  }
  if (!options.trace_path.empty()) {
    throw input_error("--trace draws a training step; a serving plan (requests=FILE) writes --svg and --json");
  }
  if (!options.costs_path.empty()) protect_input(options.costs_path);
  protect_input(options.requests_path);
  require_writable(options.svg_path, "--svg");
  require_writable(options.json_path, "--json");
  const runtime::ServePlan serving = runtime::plan_serving(config, options.requests_path, options.costs_path);
  const runtime::BatchLimits& limits = serving.limits;
  const std::string deck_batching = loaded.deck.string("inference.batching");
  log::info(
      "serve plan: {} requests from {} on {} stages, token budget {}, at most {} running, {} KV blocks of {} "
      "tokens per stage, {} bytes of K and V per token and attention layer",
      serving.requests, options.requests_path, serving.stages, limits.token_budget, limits.max_sequences,
      serving.kv_blocks, limits.block_tokens, serving.kv_token_bytes);
  log::info("costs: {}", serving.costs);
  log::info("  {:<10} {:>12} {:>10} {:>8} {:>10} {:>12}", "batching", "microbatches", "makespan s", "bubble",
            "tokens/s", "TTFT p50 ms");
  for (const runtime::PolicyPlan& p : serving.policies) {
    log::info("{} {:<10} {:>12} {:>10.3f} {:>8.3f} {:>10.0f} {:>12.2f}", p.batching == deck_batching ? '*' : ' ',
              p.batching, p.simulation.microbatches.size(), p.simulation.makespan, p.simulation.bubble(),
              p.tokens / std::max(p.simulation.makespan, 1e-300), 1e3 * p.first_token_p50);
  }
  log::info("(* the deck's inference.batching; bubble = idle/busy, each stage from its first compute to its last)");

  if (log::is_root()) {
    write_output(options.svg_path, "--svg", [&](std::ostream& out) {
      std::vector<schedule::Timeline> panels;
      for (const runtime::PolicyPlan& p : serving.policies) {
        panels.push_back(schedule::serve_timeline(p.simulation, p.batching, "s"));
        panels.back().label = fmt::format("{} batching, simulated", p.batching);
      }
      schedule::write_svg_timelines(out, panels);
    });
    write_output(options.json_path, "--json", [&](std::ostream& out) {
      nlohmann::json policies = nlohmann::json::array();
      for (const runtime::PolicyPlan& p : serving.policies) {
        policies.push_back({{"batching", p.batching},
                            {"microbatches", p.simulation.microbatches.size()},
                            {"makespan", p.simulation.makespan},
                            {"bubble", p.simulation.bubble()},
                            {"tokens_per_second", p.tokens / std::max(p.simulation.makespan, 1e-300)},
                            {"time_to_first_token_p50", p.first_token_p50}});
      }
      const nlohmann::json json = {
          {"command", "plan"},      {"deck", options.deck.path}, {"requests_file", options.requests_path},
          {"costs", serving.costs}, {"stages", serving.stages},  {"policies", policies}};
      out << json.dump(2) << '\n';
    });
  }
  return 0;
}

}  // namespace kpipe::app
