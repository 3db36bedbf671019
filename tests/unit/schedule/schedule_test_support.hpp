#pragma once
// Helpers shared by the schedule tests.

#include <string>
#include <utility>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/schedule/generate.hpp"
#include "kpipe/schedule/lower.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::schedule::testing {

inline Schedule lowered(const std::string& name, int p, int m, int v = 1, const PlanningCosts& costs = {}) {
  ScheduleSpec spec{name, p, v, m};
  spec.costs = costs;
  Schedule schedule = generate(spec);
  lower(schedule);
  return schedule;
}

// The simulator's costs of the planning costs: model stages of F, B and W, latency per transfer.
inline CostModel simulated_costs(const PlanningCosts& planning) {
  CostModel costs;
  costs.forward = planning.forward;
  costs.backward_input = planning.backward_input;
  costs.backward_weight = planning.backward_weight;
  costs.comm_latency = planning.latency;
  return costs;
}

// Every generated training schedule, with the chunks per rank it is tested at.
inline const std::vector<std::pair<std::string, int>> training_schedules = {
    {"gpipe", 1}, {"1f1b", 1},   {"interleaved", 2}, {"zb-h1", 1},     {"zb-h2", 1},
    {"zb-v", 2},  {"v-half", 2}, {"v-min", 2},       {"dualpipe-v", 2}};

// F = 1 and BW = B + W = 1: every time in these tests is an exact binary fraction.
inline CostModel unit_forward_and_backward() {
  CostModel costs;
  costs.forward = 1.0;
  costs.backward_input = 0.5;
  costs.backward_weight = 0.5;
  return costs;
}

// F = B = W = 1, the zero-bubble paper's setting.
inline CostModel unit_forward_input_weight() {
  CostModel costs;
  costs.forward = costs.backward_input = costs.backward_weight = 1.0;
  return costs;
}

// The message of the kpipe::Error that `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Compute actions of one rank, in order.
inline std::vector<Action> compute_actions(const Schedule& s, int rank) {
  std::vector<Action> out;
  for (const Action& a : s.ranks[rank]) {
    if (is_compute(a.kind)) out.push_back(a);
  }
  return out;
}

}  // namespace kpipe::schedule::testing
