// Times the schedule engine on large plans, phase by phase: what `kpipe plan`
// does after reading the deck (generate and lower, the per-rank checks,
// simulate with the cross-rank check, the post-validated steps, summarise),
// plus a full validate() for reference, and the peak memory of those phases
// per action. Each run is a child process of its own, so that its peak is its
// own. Prints one JSON document; docs/performance.md records the results.
//
//   plan_benchmark [--json FILE] [--repeat N] [SCHEDULE P V M ...]
//
// Without plans it runs interleaved p=512 v=4 m=4096, 1f1b and zb-h1 at
// p=512 m=4096, and the two plans at scale: 1f1b at p=4096 m=10000 (246 M
// actions) and on one rank at m=41000000 (123 M actions), a few GB each.

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/schedule/generate.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/simulate.hpp"
#include "kpipe/schedule/validate.hpp"

namespace {

using namespace kpipe::schedule;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One run of every phase; the phase times, the peak memory they reached, and
// the plan's size and bubble.
nlohmann::json run_once(const ScheduleSpec& spec) {
  nlohmann::json phases;
  const auto total = Clock::now();
  auto start = Clock::now();
  Schedule schedule = generate_lowered(spec);
  phases["generate_and_lower"] = seconds_since(start);
  start = Clock::now();
  validate(schedule, Checks::per_rank);
  phases["check_ranks"] = seconds_since(start);
  start = Clock::now();
  const CostModel costs;  // F = B = W = 1, free communication
  // As `kpipe plan` does when no timeline is asked for and none fits the terminal.
  const SimulationResult result = simulate(schedule, costs, Record::summary);
  phases["simulate_and_check_exchanges"] = seconds_since(start);
  start = Clock::now();
  const Bubble post_validated = post_validated_bubble(schedule, costs);
  phases["post_validated_steps"] = seconds_since(start);
  start = Clock::now();
  const std::string table = summary_table(schedule, result);
  const std::string json = summary_json(schedule, costs, result, post_validated, 1);
  phases["summarise"] = seconds_since(start);
  phases["total"] = seconds_since(total);
  const std::int64_t peak = kpipe::runtime::peak_resident_bytes();
  const auto actions = static_cast<double>(schedule.action_count());

  start = Clock::now();
  validate(schedule);
  const double full_validate = seconds_since(start);
  start = Clock::now();
  const SimulationResult every_action = simulate(schedule, costs);
  const double simulate_every_action = seconds_since(start);
  return {{"phases_s", phases},
          {"reference_s",
           {{"validate_all_checks", full_validate}, {"simulate_recording_every_action", simulate_every_action}}},
          {"actions", schedule.action_count()},
          {"peak_resident_bytes", peak},
          {"peak_bytes_per_action", static_cast<double>(peak) / actions},
          {"seconds_per_action", phases["total"].get<double>() / actions},
          {"makespan", result.makespan},
          {"bubble_idle_over_useful", result.bubble().idle_over_useful}};
}

// run_once in a child process, so that the peak memory it reports is its own
// plan's and not an earlier, larger one's.
nlohmann::json run_in_child(const ScheduleSpec& spec) {
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) throw std::runtime_error("plan_benchmark: pipe failed");
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("plan_benchmark: fork failed");
  if (child == 0) {
    close(pipe_ends[0]);
    int code = 0;
    std::string text;
    try {
      text = run_once(spec).dump();
    } catch (const std::exception& e) {
      text = nlohmann::json{{"error", e.what()}}.dump();
      code = 1;
    }
    for (std::size_t written = 0; written < text.size();) {
      const ssize_t n = write(pipe_ends[1], text.data() + written, text.size() - written);
      if (n <= 0) _exit(1);
      written += static_cast<std::size_t>(n);
    }
    _exit(code);
  }
  close(pipe_ends[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  close(pipe_ends[0]);
  int status = 0;
  waitpid(child, &status, 0);
  nlohmann::json run = nlohmann::json::parse(text.empty() ? "{}" : text);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || run.contains("error")) {
    throw std::runtime_error(fmt::format("plan_benchmark: {} p={} v={} m={} failed: {}", spec.name, spec.p, spec.v,
                                         spec.m, run.value("error", "the child process died")));
  }
  return run;
}

nlohmann::json benchmark(const ScheduleSpec& spec, int repeat) {
  nlohmann::json best;
  for (int i = 0; i < repeat; ++i) {
    nlohmann::json run = run_in_child(spec);
    if (best.is_null() || run["phases_s"]["total"] < best["phases_s"]["total"]) best = std::move(run);
  }
  best["schedule"] = spec.name;
  best["p"] = spec.p;
  best["v"] = spec.v;
  best["m"] = spec.m;
  best["repeat"] = repeat;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int repeat = 3;
  std::vector<ScheduleSpec> specs;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--json" && i + 1 < argc) {
        json_path = argv[++i];
      } else if (arg == "--repeat" && i + 1 < argc) {
        repeat = std::max(1, std::atoi(argv[++i]));
      } else if (i + 3 < argc) {
        specs.push_back({arg, std::atoi(argv[i + 1]), std::atoi(argv[i + 2]), std::atoi(argv[i + 3])});
        i += 3;
      } else {
        std::cerr << "usage: plan_benchmark [--json FILE] [--repeat N] [SCHEDULE P V M ...]\n";
        return 2;
      }
    }
    if (specs.empty()) {
      specs = {{"interleaved", 512, 4, 4096},
               {"1f1b", 512, 1, 4096},
               {"zb-h1", 512, 1, 4096},
               {"1f1b", 4096, 1, 10000},
               {"1f1b", 1, 1, 41000000}};
    }
    nlohmann::json report = {{"benchmark", "kpipe schedule engine"}, {"runs", nlohmann::json::array()}};
    for (const auto& spec : specs) report["runs"].push_back(benchmark(spec, repeat));
    const std::string text = report.dump(2) + "\n";
    std::cout << text;
    if (!json_path.empty()) std::ofstream(json_path) << text;
  } catch (const kpipe::Error& e) {
    std::cerr << "plan_benchmark: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
