#include "kpipe/schedule/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "generators.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"
#include "lowering.hpp"

namespace kpipe::schedule {

namespace {

using RankGenerator = void (*)(const ScheduleSpec&, int rank, std::vector<Action>& out);

struct Generator {
  const char* name;
  RankGenerator rank_actions;
};

constexpr Generator generators[] = {
    {"gpipe", detail::gpipe}, {"1f1b", detail::one_f_one_b},     {"interleaved", detail::interleaved},
    {"zb-h1", detail::zb_h1}, {"forward", detail::forward_only},
};

// A lowered plan holds at most ~6 actions per (rank, chunk, microbatch);
// beyond this many the plan would not fit in memory (12 bytes per action,
// plus 8 for its simulated time).
constexpr double max_plan_actions = 250e6;

const Generator& find_generator(const std::string& name) {
  for (const auto& generator : generators) {
    if (name == generator.name) return generator;
  }
  const std::string suggestion = nearest_match(name, schedule_names());
  throw input_error(fmt::format("unknown schedule '{}'{}; choose {}", name,
                                suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion),
                                join_choices(schedule_names())));
}

void check_spec(const ScheduleSpec& spec) {
  if (spec.p < 1 || spec.v < 1 || spec.m < 1) {
    throw input_error(
        fmt::format("a schedule needs p, v and m >= 1, but p = {}, v = {}, m = {}", spec.p, spec.v, spec.m));
  }
  const bool interleaved = spec.name == "interleaved";
  if (spec.v > 1 && !interleaved) {
    throw input_error(
        fmt::format("v = {} model chunks per rank needs the interleaved schedule, not '{}'; use v = 1 "
                    "or the interleaved schedule",
                    spec.v, spec.name));
  }
  if (interleaved && spec.v < 2) {
    throw input_error(fmt::format("the interleaved schedule needs v >= 2 model chunks per rank, but v = {}", spec.v));
  }
  if (interleaved && spec.m < spec.p) {
    throw input_error(
        fmt::format("the interleaved schedule needs m >= p (any m >= p works), but m = {} < p = {}", spec.m, spec.p));
  }
  const double actions = 6.0 * spec.p * spec.v * spec.m;
  if (spec.v > max_chunks || spec.p > max_ranks) {
    throw input_error(fmt::format("p = {}, v = {}: a schedule holds at most {} ranks and {} chunks per rank", spec.p,
                                  spec.v, max_ranks, max_chunks));
  }
  if (actions > max_plan_actions) {
    throw input_error(
        fmt::format("p = {}, v = {}, m = {} make a plan of about {:.0f} million actions; kpipe plans "
                    "at most {:.0f} million (p·v·m <= {:.0f} million)",
                    spec.p, spec.v, spec.m, actions / 1e6, max_plan_actions / 1e6, max_plan_actions / 6e6));
  }
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const auto& generator : generators) list.emplace_back(generator.name);
    return list;
  }();
  return names;
}

Schedule generate(const ScheduleSpec& spec) {
  const Generator& generator = find_generator(spec.name);
  check_spec(spec);
  Schedule schedule{spec.name, spec.p, spec.v, spec.m, {}, Placement::looped(spec.p, spec.v)};
  schedule.ranks.reserve(static_cast<std::size_t>(spec.p));
  for (int rank = 0; rank < spec.p; ++rank) generator.rank_actions(spec, rank, schedule.ranks.emplace_back());
  return schedule;
}

Schedule generate_lowered(const ScheduleSpec& spec) {
  const Generator& generator = find_generator(spec.name);
  check_spec(spec);
  Schedule schedule{spec.name, spec.p, spec.v, spec.m, {}, Placement::looped(spec.p, spec.v)};
  schedule.ranks.reserve(static_cast<std::size_t>(spec.p));
  bool training = false;
  std::vector<Action> compute;  // reused: only the lowered lists take new memory
  for (int rank = 0; rank < spec.p; ++rank) {
    compute.clear();
    generator.rank_actions(spec, rank, compute);
    // Every rank of a generated schedule trains, or none does.
    if (rank == 0) {
      training = std::any_of(compute.begin(), compute.end(), [](const Action& a) { return releases_stash(a.kind); });
    }
    schedule.ranks.push_back(detail::lower_rank(schedule, rank, compute, training, nullptr));
  }
  return schedule;
}

}  // namespace kpipe::schedule
