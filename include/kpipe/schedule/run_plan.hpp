#pragma once
// The schedule and cost model a run asks for, in one place, so that
// `kpipe plan` and the runtime read a run configuration the same way.
//
// Costs (sim.cost_*) are per pipeline stage, i.e. for the share of the
// model one rank holds; with v chunks per rank each model stage costs 1/v of
// it, so schedules with different v compare at equal model size. The
// schedule module knows no model: what each message and tensor-group sum
// moves is charged by runtime::charged_plan from each stage's traffic
// (model::stage_traffic); until then messages cost latency only.

#include <optional>
#include <string>

#include "kpipe/config/run_config.hpp"
#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/simulate.hpp"
#include "kpipe/schedule/validate.hpp"

namespace kpipe::schedule {

struct RunPlan {
  ScheduleSpec spec;
  CostModel costs;
  std::string schedule_file;  // pipeline.schedule_file; empty: generate spec.name
  // The schedule file's text when the caller has read it already (the runtime
  // reads it on rank 0 and broadcasts it); unset: make_schedule reads the file.
  std::optional<std::string> schedule_text;
  int data_parallel = 1;
  // pipeline.validate_schedule: off runs a schedule file unchecked (the
  // runtime's watchdog then reports any hang), for debugging hand-written ones.
  bool validate = true;
};

// The plan of a (validated) run configuration.
RunPlan run_plan(const config::RunConfig& config);

// The lowered, validated schedule of the plan: generated, or read from the
// schedule file (which must match the deck's p, v and m). With
// Checks::per_rank a generated schedule skips the cross-rank run, for callers
// that simulate it next; a schedule file always gets every check, so that
// problems point at its lines.
Schedule make_schedule(const RunPlan& plan, Checks checks = Checks::all);

}  // namespace kpipe::schedule
