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
#include "cost_file.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/runtime/memory_estimate.hpp"
#include "kpipe/runtime/run_plan.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "output_file.hpp"
#include "traffic_report.hpp"

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

// Ranks (and boundaries) listed one per line; beyond, the largest alone.
constexpr int listed_ranks = 16;

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

// The memory estimate `kpipe run` checks before allocating, per pipeline
// rank (the largest one alone when there are many ranks); "process" is what
// this kpipe process holds before any model, a stand-in for a run's ranks.
void print_memory(const config::RunConfig& config, const model::TrainerSpec& spec, const schedule::Schedule& schedule) {
  const std::int64_t baseline = runtime::resident_bytes();
  int largest = 0;
  std::vector<runtime::MemoryEstimate> estimates;
  for (int rank = 0; rank < schedule.p; ++rank) {
    estimates.push_back(runtime::estimate_memory(spec, schedule, rank, config.pipeline.tensor_parallel,
                                                 !comm::mpi_reaches_device_memory(), baseline));
    if (estimates.back().total() > estimates[largest].total()) largest = rank;
  }
  if (schedule.p <= listed_ranks) {
    for (int rank = 0; rank < schedule.p; ++rank) log::info("memory, rank {}: {}", rank, estimates[rank].describe());
  } else {
    log::info("memory, largest (rank {}): {}", largest, estimates[largest].describe());
  }
}

// The bytes each rank sends across every stage boundary per microbatch, and
// each pipeline rank's volume per step and link (the same for its tensor
// ranks and replicas), with its time at sim.comm_latency and sim.comm_bandwidth;
// with many ranks, the first boundaries and the rank that moves the most.
void print_traffic(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                   const schedule::Schedule& schedule) {
  const int parts = model::boundary_parts(config.pipeline);
  const int boundaries = static_cast<int>(stages.size()) - 1;
  for (int s = 0; s < std::min(boundaries, listed_ranks); ++s) {
    const std::int64_t whole = stages[s].output_bytes;
    const char* why = model::boundary_gathered(config.pipeline) ? "scatter/gather" : "sequence-parallel rows";
    log::info("boundary {} -> {}: {} bytes per microbatch and rank{}", s, s + 1, whole / parts,
              parts > 1 ? fmt::format(" (1/{} of {}: {})", parts, whole, why) : std::string());
  }
  if (boundaries > listed_ranks) log::info("... and {} boundaries more", boundaries - listed_ranks);
  const auto ranks = predicted_traffic(stages, schedule, config.pipeline.data_parallel);
  const auto total = [](const model::StepTraffic& r) { return r.pipeline.bytes + r.tensor.bytes + r.data.bytes; };
  if (schedule.p > listed_ranks) {
    const auto most =
        std::max_element(ranks.begin(), ranks.end(), [&](const auto& a, const auto& b) { return total(a) < total(b); });
    log::info("communication per step, most (pipeline rank {}): {}", most - ranks.begin(), describe(*most, config.sim));
    return;
  }
  for (int rank = 0; rank < schedule.p; ++rank) {
    log::info("communication per step, pipeline rank {}: {}", rank, describe(ranks[rank], config.sim));
  }
}

// The plan's grid and its predicted volume per pipeline rank, for --json.
nlohmann::json traffic_json(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                            const schedule::Schedule& schedule) {
  const auto& shape = config.pipeline;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : predicted_traffic(stages, schedule, shape.data_parallel)) {
    ranks.push_back(app::traffic_json(rank, config.sim));
  }
  nlohmann::json boundaries = nlohmann::json::array();
  for (std::size_t s = 0; s + 1 < stages.size(); ++s) boundaries.push_back(stages[s].output_bytes);
  return {{"grid",
           {{"p", shape.stages},
            {"t", shape.tensor_parallel},
            {"d", shape.data_parallel},
            {"world", shape.world_size()},
            {"scatter_gather", model::boundary_gathered(shape)}}},
          {"boundary_bytes", boundaries},
          {"ranks", ranks}};
}

void print_plan(const LoadedDeck& loaded, const model::TrainerSpec& spec,
                const std::vector<model::StageTraffic>& traffic, const schedule::RunPlan& plan,
                const schedule::Schedule& schedule, const schedule::SimulationResult& result) {
  const auto& s = loaded.config.pipeline;
  const std::string source = plan.schedule_file.empty() ? "generated" : "read from " + printable(plan.schedule_file);
  log::info("{}", comm::grid_layout(s.stages, s.tensor_parallel, s.data_parallel));
  log::info("plan: {} schedule ({}), p = {} ranks, v = {} chunk{} per rank, d = {}, m = {} microbatches of {} samples",
            schedule.name, source, schedule.p, schedule.v, schedule.v > 1 ? "s" : "", s.data_parallel, schedule.m,
            loaded.config.train.microbatch_size);
  log::info("actions: {} per step, validated (no missing dependency, every send matched, no deadlock)",
            schedule.action_count());
  log::info("makespan: {} (time units of sim.cost_*; a model chunk costs 1/v of a pipeline stage)", result.makespan);
  if (const auto theory = schedule::theoretical_bubble(schedule, plan.costs)) {
    log::info("{}", bubble_line(fmt::format("bubble, theory {}:", theory->formula).c_str(), theory->bubble));
  }
  log::info("{}", bubble_line("bubble, simulated:", result.bubble()));
  log::info("transfers: {} messages, {:.1f} MiB moved (per boundary below)", result.transfers,
            static_cast<double>(result.bytes_moved) / (1 << 20));
  log::info("\n{}", schedule::summary_table(schedule, result));
  print_memory(loaded.config, spec, schedule);
  print_traffic(loaded.config, traffic, schedule);
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

}  // namespace

int plan_command(const Environment& env, PlanOptions options) {
  options.requests_path = take_requests_argument(options.deck);
  const LoadedDeck loaded = load_deck(options.deck);
  if (!options.requests_path.empty()) return serve_plan_command(loaded, options);
  if (!options.costs_path.empty()) protect_input(options.costs_path);
  require_writable(options.svg_path, "--svg");
  require_writable(options.trace_path, "--trace");
  require_writable(options.json_path, "--json");
  // The partition and each stage's traffic, once for every report below.
  const model::TrainerSpec spec = model::TrainerSpec::from_config(loaded.config);
  const std::vector<model::StageTraffic> traffic = model::stage_traffic(loaded.config, spec.stages);
  const schedule::RunPlan plan = runtime::run_plan(loaded.config, traffic);
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
    fit = read_cost_file(options.costs_path);
    calibration = deck_calibration(*fit, options.costs_path, schedule, loaded.config.train.microbatch_size);
  }
  // Every action's time is kept only when a timeline will be drawn.
  const int columns = terminal_columns();
  const bool ascii = options.ascii && schedule::ascii_timeline_can_fit(schedule, columns);
  const bool timelines = ascii || !options.svg_path.empty() || !options.trace_path.empty();
  const schedule::SimulationResult result =
      schedule::simulate(schedule, plan.costs, timelines ? schedule::Record::every_action : schedule::Record::summary);
  require_finite(result);

  // The SVG is built before any file is touched: a plan too large to draw is an input error.
  std::string svg;
  if (!options.svg_path.empty()) {
    std::ostringstream text;
    schedule::write_svg_timeline(text, schedule, result);
    svg = text.str();
  }

  std::optional<schedule::CalibratedStep> calibrated;
  if (calibration) calibrated = schedule::predict_step(schedule, *calibration, plan.costs.max_in_flight);
  print_plan(loaded, spec, traffic, plan, schedule, result);
  if (calibrated)
    print_calibrated(options.costs_path, *fit, *calibration, *calibrated, loaded.config.train.global_batch);
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
        nlohmann::json::parse(schedule::summary_json(schedule, plan.costs, result, plan.data_parallel));
    json["communication"] = traffic_json(loaded.config, traffic, schedule);
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
                          {"bubble",
                           {{"idle_over_useful", calibrated->bubble.idle_over_useful},
                            {"idle_over_total", calibrated->bubble.idle_over_total}}}};
    out << json.dump(2) << '\n';
  });
  return 0;
}

}  // namespace kpipe::app
