#include <nlohmann/json.hpp>

#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/render.hpp"

namespace kpipe::schedule {

namespace {

nlohmann::json bubble_json(const Bubble& bubble) {
  return {{"idle_over_useful", bubble.idle_over_useful}, {"idle_over_total", bubble.idle_over_total}};
}

}  // namespace

std::string summary_json(const Schedule& schedule, const CostModel& costs, const SimulationResult& result,
                         const std::optional<Bubble>& post_validated, int data_parallel) {
  nlohmann::json theory = nullptr;
  if (const auto expected = theoretical_bubble(schedule, costs)) {
    theory = bubble_json(expected->bubble);
    theory["formula_idle_over_useful"] = expected->formula;
  }
  nlohmann::json bound = nullptr;
  if (const auto stated = activation_bound(schedule)) {
    bound = {{"stage_microbatches", stated->stage_microbatches}, {"formula", stated->formula}};
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < schedule.p; ++r) {
    const RankStats& s = result.ranks[r];
    ranks.push_back({{"rank", r},
                     {"busy", s.busy},
                     {"idle", s.idle},
                     {"span", s.span},
                     {"peak_stashed_activations", s.peak_stashed},
                     // A model chunk holds 1/v of a pipeline stage.
                     {"peak_held_stage_microbatches", s.peak_held / static_cast<double>(schedule.v)},
                     {"bytes_sent", s.bytes_sent},
                     {"actions", schedule.ranks[r].size()}});
  }
  const nlohmann::json summary = {
      {"schedule", schedule.name},
      {"p", schedule.p},
      {"v", schedule.v},
      {"d", data_parallel},
      {"m", schedule.m},
      {"actions", schedule.action_count()},
      {"time_unit", "sim.cost_* of the deck"},
      {"costs",
       {{"forward", costs.forward},
        {"backward_input", costs.backward_input},
        {"backward_weight", costs.backward_weight},
        {"comm_latency", costs.comm_latency},
        {"comm_bandwidth", costs.comm_bandwidth},
        {"bytes_per_transfer", costs.bytes_per_transfer}}},
      {"makespan", result.makespan},
      {"bubble",
       {{"theoretical", theory},
        {"simulated", bubble_json(result.bubble())},
        {"simulated_span", bubble_json(result.span_bubble())},
        {"simulated_post_validated", post_validated ? bubble_json(*post_validated) : nlohmann::json()}}},
      {"transfers", result.transfers},
      {"bytes_moved", result.bytes_moved},
      {"activation_bound", bound},
      {"ranks", ranks},
  };
  return summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kpipe::schedule
