// kpipe plan: build, validate and simulate a deck's schedule without any
// compute, and report it (DESIGN.md §7).

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/measurement/cost_file.hpp"
#include "kpipe/runtime/measurement/throughput.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/runtime/tuning/run_prediction.hpp"
#include "kpipe/runtime/tuning/traffic_report.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/render.hpp"
#include "memory_levers.hpp"

namespace kpipe::app {

namespace {

int terminal_columns() {
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return std::min<int>(size.ws_col, limits::terminal_columns);
  }
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(columns, &end, 10);
    if (errno == 0 && end != columns && n > 0) return static_cast<int>(std::min<long>(n, limits::terminal_columns));
  }
  return 120;
}

// A simulation that overflows (huge costs, a tiny bandwidth) has no meaningful
// makespan or bubble; say which keys make it so.
void require_finite(const schedule::SimulationResult& result) {
  if (std::isfinite(result.makespan)) return;
  throw input_error(fmt::format(
      "the simulated makespan is {}: lower sim.cost_forward, sim.cost_backward_input, sim.cost_backward_weight or "
      "sim.comm_latency, or raise sim.comm_bandwidth (0 ignores bandwidth), so that the times stay finite",
      result.makespan));
}

std::string bubble_line(const char* what, const schedule::Bubble& bubble) {
  return fmt::format("{:<34} idle/useful = {:.4f} ({:.1f}%)   idle/total = {:.4f} ({:.1f}%)", what,
                     bubble.idle_over_useful, 100.0 * bubble.idle_over_useful, bubble.idle_over_total,
                     100.0 * bubble.idle_over_total);
}

// Each rank's activations held from F to W, next to the bound the
// schedule's authors state (V-Half, V-Min). A model chunk holds 1/v of a
// pipeline stage.
std::string held_line(const schedule::Schedule& schedule, const schedule::SimulationResult& result) {
  const auto stage_microbatches = [&](int rank) { return result.ranks[rank].peak_held / double(schedule.v); };
  std::string line = "activations held from F to W, in stage-microbatches:";
  if (schedule.p <= limits::listed_ranks) {
    line += " ranks";
    for (int r = 0; r < schedule.p; ++r) line += fmt::format(" {:g}", stage_microbatches(r));
  } else {
    const auto worst = std::max_element(result.ranks.begin(), result.ranks.end(),
                                        [](const auto& a, const auto& b) { return a.peak_held < b.peak_held; });
    const int rank = static_cast<int>(worst - result.ranks.begin());
    line += fmt::format(" at most {:g} (rank {})", stage_microbatches(rank), rank);
  }
  if (const auto bound = schedule::activation_bound(schedule)) {
    line += fmt::format("; the authors' bound {} = {}", bound->formula, bound->stage_microbatches);
  }
  return line;
}

void print_plan(const LoadedDeck& loaded, const runtime::RunPrediction& prediction, const schedule::Schedule& schedule,
                const schedule::SimulationResult& result, const std::optional<schedule::Bubble>& post_validated,
                const std::vector<LeverMemory>& levers, std::int64_t baseline_bytes) {
  const schedule::RunPlan& plan = prediction.plan;
  const auto& s = loaded.config.pipeline;
  const std::string source = plan.schedule_file.empty() ? "generated" : "read from " + printable(plan.schedule_file);
  log::info("{}", comm::grid_layout(s.stages, s.tensor_parallel, s.data_parallel));
  log::info("plan: {} schedule ({}), p = {} ranks, v = {} chunk{} per rank, d = {}, m = {} microbatches of {} samples",
            schedule.name, source, schedule.p, schedule.v, schedule.v > 1 ? "s" : "", s.data_parallel, schedule.m,
            loaded.config.train.microbatch_size);
  log::info("actions: {} per step, validated (no missing dependency, every send matched, no deadlock)",
            schedule.action_count());
  log::info(
      "makespan: {} (time units of sim.cost_*; a model chunk costs 1/v of a pipeline stage); a rank's span runs from "
      "its first compute to its last",
      result.makespan);
  if (const auto theory = schedule::theoretical_bubble(schedule, plan.costs)) {
    log::info("{}", bubble_line(fmt::format("bubble, theory {}:", theory->formula).c_str(), theory->bubble));
  }
  log::info("{}", bubble_line("bubble, simulated:", result.bubble()));
  log::info("{}", bubble_line("bubble, simulated, within spans:", result.span_bubble()));
  if (post_validated) {
    log::info("{}  (train.post_validation: no barrier between steps)",
              bubble_line("bubble, simulated, post-validated:", *post_validated));
  }
  log::info("transfers: {} messages, {:.1f} MiB moved (per boundary below)", result.transfers,
            static_cast<double>(result.bytes_moved) / (1 << 20));
  log::info("\n{}", schedule::summary_table(schedule, result));
  if (schedule.training()) log::info("{}", held_line(schedule, result));
  runtime::log_memory_estimates(runtime::memory_estimates(loaded.config, prediction.spec, schedule, baseline_bytes));
  if (!levers.empty()) {
    log::info("memory by schedule and recomputation, the largest rank's estimate in MiB (b = {}, d = {}, t = {}):\n{}",
              loaded.config.train.microbatch_size, loaded.config.pipeline.data_parallel,
              loaded.config.pipeline.tensor_parallel, lever_table(levers, loaded.config.runtime.memory_limit_mib));
  }
  runtime::log_traffic(loaded.config, prediction.traffic, schedule);
}

// The measured costs at the deck's b, for the deck's pipeline shape only.
schedule::Calibration deck_calibration(const schedule::CostFit& fit, const std::string& path,
                                       const schedule::Schedule& schedule, int b) {
  if (fit.p != schedule.p || fit.v != schedule.v) {
    throw input_error(fmt::format(
        "--costs {}: the costs were measured with p = {}, v = {}, but the deck has p = {}, v = {}; calibrate with a "
        "run of this pipeline shape",
        printable(path), fit.p, fit.v, schedule.p, schedule.v));
  }
  return fit.at(b);
}

void print_calibrated(const std::string& path, const schedule::CostFit& fit, const schedule::Calibration& c,
                      const schedule::CalibratedStep& step, int global_batch) {
  std::string sizes;
  for (int b : fit.sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
  const bool measured = std::find(fit.sizes.begin(), fit.sizes.end(), c.microbatch_size) != fit.sizes.end();
  log::info("calibrated: costs of {} (measured at b = {}{})", printable(path), sizes,
            measured ? "" : "; this b is extrapolated along the fit");
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    log::info("  model stage {}: F {:.4f} ms, B {:.4f} ms, W {:.4f} ms", s, 1e3 * c.stages[s].forward,
              1e3 * c.stages[s].backward_input, 1e3 * c.stages[s].backward_weight);
  }
  log::info(
      "  per message: send {:.1f} us, receive {:.1f} us, link {:.1f} us + {} bytes at {}", 1e6 * c.send_seconds,
      1e6 * c.receive_seconds, 1e6 * c.link_latency, c.bytes_per_transfer,
      c.link_bandwidth > 0 ? fmt::format("{:.2f} GB/s", c.link_bandwidth / 1e9) : std::string("no bandwidth term"));
  log::info("predicted step: {:.3f} ms = pipeline makespan {:.3f} ms + {:.3f} ms after it; {:.0f} samples/s",
            1e3 * step.step_seconds, 1e3 * step.makespan, 1e3 * c.step_overhead, global_batch / step.step_seconds);
  log::info("{}", bubble_line(fmt::format("bubble, calibrated ({} draws):", step.simulations).c_str(), step.bubble));
}

// The calibrated step's model FLOP/s (runtime/measurement/throughput.hpp), on all the deck's ranks.
runtime::Throughput predicted_throughput(const config::RunConfig& config, double step_seconds) {
  const config::PipelineConfig& shape = config.pipeline;
  return runtime::throughput(model::ModelSpec::from_config(config.model), config.train.global_batch,
                             shape.stages * shape.tensor_parallel * shape.data_parallel, step_seconds,
                             runtime::reference_rate(config));
}

}  // namespace

int plan_command(const runtime::Environment& env, PlanOptions options) {
  options.requests_path = take_requests_argument(options.deck);
  const LoadedDeck loaded = load_deck(options.deck);
  if (!options.requests_path.empty()) return serve_plan_command(loaded, options);
  if (!options.costs_path.empty()) protect_input(options.costs_path);
  require_writable(options.svg_path, "--svg");
  require_writable(options.trace_path, "--trace");
  require_writable(options.json_path, "--json");
  // The partition and each stage's traffic, once for every report below.
  const runtime::RunPrediction prediction = runtime::predict_run(loaded.config);
  const schedule::RunPlan& plan = prediction.plan;
  // A plan too large to draw is refused before it is generated: the SVG holds p·v·m boxes at least.
  if (!options.svg_path.empty()) {
    schedule::require_svg_fits(static_cast<double>(plan.spec.p) * plan.spec.v * plan.spec.m);
  }
  // simulate() makes the validator's cross-rank run as it goes.
  const schedule::Schedule schedule = schedule::make_schedule(plan, schedule::Checks::per_rank);
  // The costs file is read before anything is printed: a bad one is an input error alone.
  std::optional<schedule::CostFit> fit;
  std::optional<schedule::Calibration> calibration;
  if (!options.costs_path.empty()) {
    fit = runtime::read_cost_file(options.costs_path);
    calibration = deck_calibration(*fit, options.costs_path, schedule, loaded.config.train.microbatch_size);
  }
  // Every action's time is kept only when a timeline will be drawn.
  const int columns = terminal_columns();
  const bool ascii = options.ascii && schedule::ascii_timeline_can_fit(schedule, columns);
  const bool timelines = ascii || !options.svg_path.empty() || !options.trace_path.empty();
  const schedule::SimulationResult result =
      schedule::simulate(schedule, plan.costs, timelines ? schedule::Record::every_action : schedule::Record::summary);
  require_finite(result);
  // Training steps without a barrier between them (train.post_validation): printed and in --json.
  const std::optional<schedule::Bubble> post_validated =
      schedule.training() ? std::optional(schedule::post_validated_bubble(schedule, plan.costs)) : std::nullopt;

  // The SVG is built before any file is touched: a plan too large to draw is an input error.
  std::string svg;
  if (!options.svg_path.empty()) {
    std::ostringstream text;
    schedule::write_svg_timeline(text, schedule, result);
    svg = text.str();
  }

  std::optional<schedule::CalibratedStep> calibrated;
  std::optional<runtime::Throughput> throughput;  // once: its reference rate may be measured
  if (calibration) {
    calibrated = schedule::predict_step(schedule, *calibration, plan.costs.max_in_flight);
    throughput = predicted_throughput(loaded.config, calibrated->step_seconds);
  }
  // The memory levers side by side, where the ranks are few enough to list,
  // each estimate from the same baseline as the deck's own.
  const std::int64_t baseline = runtime::resident_bytes();
  const std::vector<LeverMemory> levers = schedule.training() && schedule.p <= limits::listed_ranks
                                              ? memory_levers(loaded, baseline)
                                              : std::vector<LeverMemory>();
  print_plan(loaded, prediction, schedule, result, post_validated, levers, baseline);
  if (calibrated) {
    print_calibrated(options.costs_path, *fit, *calibration, *calibrated, loaded.config.train.global_batch);
    log::info("predicted throughput: {}", throughput->describe());
  }
  if (options.ascii) {
    const auto timeline = ascii ? schedule::ascii_timeline(schedule, result, columns) : std::nullopt;
    if (timeline) {
      log::info("{}", *timeline);
    } else {
      log::info("(the timeline does not fit in {} columns; write it with --svg FILE or --trace FILE)", columns);
    }
  }
  if (env.rank() != 0) return 0;
  write_output(options.svg_path, "--svg", [&](std::ostream& out) { out << svg; });
  write_output(options.trace_path, "--trace",
               [&](std::ostream& out) { schedule::write_chrome_trace(out, schedule, result); });
  write_output(options.json_path, "--json", [&](std::ostream& out) {
    nlohmann::json json =
        nlohmann::json::parse(schedule::summary_json(schedule, plan.costs, result, post_validated, plan.data_parallel));
    json["communication"] = runtime::plan_traffic_json(loaded.config, prediction.traffic, schedule);
    if (!levers.empty()) json["memory_levers"] = levers_json(levers);
    if (!calibrated) {
      out << json.dump(2) << '\n';
      return;
    }
    json["calibrated"] = {{"costs", options.costs_path},
                          {"costs_at_b", nlohmann::json::parse(schedule::calibration_json(*calibration))},
                          {"step_seconds", calibrated->step_seconds},
                          {"makespan_seconds", calibrated->makespan},
                          {"simulations", calibrated->simulations},
                          {"samples_per_second", loaded.config.train.global_batch / calibrated->step_seconds},
                          {"throughput", throughput->to_json()},
                          {"bubble",
                           {{"idle_over_useful", calibrated->bubble.idle_over_useful},
                            {"idle_over_total", calibrated->bubble.idle_over_total}}}};
    out << json.dump(2) << '\n';
  });
  return 0;
}

}  // namespace kpipe::app
