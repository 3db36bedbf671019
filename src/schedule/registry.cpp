#include "kpipe/schedule/registry.hpp"

#include <fmt/format.h>

#include "generators/generators.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::schedule {

namespace {

// The one list of schedules: kpipe's own, then what register_schedule added.
// Explicit calls, not self-registering objects: a static library drops
// object files nothing refers to.
std::vector<const ScheduleInfo*>& registry() {
  static std::vector<const ScheduleInfo*> list = {
      &detail::gpipe_info(),      &detail::one_f_one_b_info(),  &detail::interleaved_info(), &detail::zb_h1_info(),
      &detail::zb_h2_info(),      &detail::zb_v_info(),         &detail::v_half_info(),      &detail::v_min_info(),
      &detail::dualpipe_v_info(), &detail::forward_only_info(),
  };
  return list;
}

std::int64_t lookups = 0;

}  // namespace

std::int64_t schedule_lookups() { return lookups; }

std::string ShapeCheck::describe_virtual_stages() const {
  return virtual_stages_source.empty() ? fmt::format("pipeline.virtual_stages = {}", v) : virtual_stages_source;
}

const ScheduleInfo* registered_schedule(std::string_view name) {
  ++lookups;
  for (const ScheduleInfo* info : registry()) {
    if (info->name == name) return info;
  }
  return nullptr;
}

const ScheduleInfo& find_schedule(std::string_view name) {
  if (const ScheduleInfo* info = registered_schedule(name)) return *info;
  const std::string suggestion = nearest_match(name, schedule_names());
  throw input_error(fmt::format("unknown schedule '{}'{}; choose {}", name,
                                suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion),
                                join_choices(schedule_names())));
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const ScheduleInfo* info : registry()) names.emplace_back(info->name);
  return names;
}

void register_schedule(const ScheduleInfo& info) {
  if (info.name.empty() || !info.generator || !info.check || !info.placement || !info.bubble) {
    throw input_error(
        fmt::format("schedule '{}' needs a name, a generator, a check, a placement and a bubble", info.name));
  }
  if (registered_schedule(info.name)) {
    throw input_error(fmt::format("schedule '{}' is registered twice; give the new schedule another name", info.name));
  }
  registry().push_back(&info);
}

void check_shape(std::string_view name, const ShapeCheck& shape) { check_shape(find_schedule(name), shape); }

void check_shape(const ScheduleInfo& info, const ShapeCheck& shape) {
  if (auto problem = info.check(shape)) throw input_error(*problem);
}

std::optional<std::string> shape_advice(const ScheduleInfo& info, const ShapeCheck& shape) {
  return info.advice ? info.advice(shape) : std::nullopt;
}

void check_shape(const ScheduleSpec& spec) { check_shape(spec.name, ShapeCheck::of(spec)); }

std::optional<ActivationBound> activation_bound(const Schedule& schedule) {
  const ScheduleInfo* info = schedule.entry ? schedule.entry : registered_schedule(schedule.name);
  if (!info || !info->activation_bound) return std::nullopt;
  return info->activation_bound(schedule.p);
}

Placement placement_of(std::string_view name, int p, int v) {
  const ScheduleInfo* info = registered_schedule(name);
  return info ? info->placement(p, v) : Placement::looped(p, v);
}

namespace detail {

std::optional<std::string> one_chunk_per_rank(const ShapeCheck& shape, std::string_view schedule) {
  if (shape.v == 1) return std::nullopt;
  return fmt::format(
      "{} needs pipeline.schedule = \"interleaved\" (or \"zb-v\" for 2 chunks), but the schedule is "
      "\"{}\"; set pipeline.virtual_stages = 1 or use the interleaved schedule",
      shape.describe_virtual_stages(), schedule);
}

std::string too_few_microbatches(std::string_view schedule, const ShapeCheck& shape) {
  return fmt::format(
      "the {} schedule needs m >= p, but m = {} microbatches < p = {} stages; raise "
      "train.global_batch to at least {} or lower train.microbatch_size",
      schedule, shape.m, shape.p, static_cast<long long>(shape.p) * shape.microbatch_size * shape.data_parallel);
}

TheoreticalBubble bubble_from_ratio(double idle_over_useful, std::string formula) {
  return {{idle_over_useful, idle_over_useful / (1.0 + idle_over_useful)}, std::move(formula)};
}

}  // namespace detail

}  // namespace kpipe::schedule
