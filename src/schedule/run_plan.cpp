#include "kpipe/schedule/run_plan.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/schedule/generate.hpp"
#include "kpipe/schedule/lower.hpp"
#include "kpipe/schedule/text_form.hpp"

namespace kpipe::schedule {

namespace {

void check_matches(const ScheduleFile& file, const ScheduleSpec& spec) {
  const Schedule& s = file.schedule;
  const auto mismatch = [&](const char* what, int in_file, int in_deck, const char* key) {
    if (in_file == in_deck) return;
    throw input_error(fmt::format("{}: the schedule is for {} = {}, but the deck has {} = {} ({}); make them agree",
                                  file.source, what, in_file, what, in_deck, key));
  };
  mismatch("p", s.p, spec.p, "pipeline.stages");
  mismatch("v", s.v, spec.v, "pipeline.virtual_stages");
  mismatch("m", s.m, spec.m, "train.global_batch / (train.microbatch_size * pipeline.data_parallel)");
}

}  // namespace

RunPlan run_plan(const config::RunConfig& config) {
  const config::PipelineConfig& shape = config.pipeline;
  RunPlan plan;
  plan.spec = {shape.schedule, shape.stages, shape.virtual_stages, shape.microbatches, shape.schedule_entry};
  plan.spec.extra_warmup = shape.extra_warmup;
  plan.data_parallel = shape.data_parallel;
  plan.schedule_file = shape.schedule_file;
  plan.validate = shape.validate_schedule;
  const double per_chunk = 1.0 / shape.virtual_stages;
  plan.costs.forward = config.sim.cost_forward * per_chunk;
  plan.costs.backward_input = config.sim.cost_backward_input * per_chunk;
  plan.costs.backward_weight = config.sim.cost_backward_weight * per_chunk;
  plan.costs.overlap = config.sim.overlap;
  plan.costs.comm_latency = config.sim.comm_latency;
  plan.costs.comm_bandwidth = config.sim.comm_bandwidth;
  plan.costs.max_in_flight = config.sim.max_in_flight;
  plan.spec.costs = {plan.costs.forward, plan.costs.backward_input, plan.costs.backward_weight,
                     plan.costs.comm_latency};
  return plan;
}

Schedule make_schedule(const RunPlan& plan, Checks checks) {
  if (plan.schedule_file.empty()) {
    Schedule schedule = generate_lowered(plan.spec);
    validate(schedule, checks);
    return schedule;
  }
  ScheduleFile file =
      plan.schedule_text ? parse_text(*plan.schedule_text, plan.schedule_file) : read_schedule_file(plan.schedule_file);
  check_matches(file, plan.spec);
  if (!plan.validate) {
    if (!is_lowered(file.schedule)) lower(file.schedule);
    return std::move(file.schedule);
  }
  return checked_schedule(std::move(file));
}

}  // namespace kpipe::schedule
