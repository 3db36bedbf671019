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
#include <sstream>

#include "commands.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/runtime/memory_estimate.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "output_file.hpp"

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

// The memory estimate `kpipe run` checks before allocating, per pipeline
// rank (the largest one alone when there are many ranks); "process" is what
// this kpipe process holds before any model, a stand-in for a run's ranks.
void print_memory(const config::RunConfig& config, const schedule::Schedule& schedule) {
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const std::int64_t baseline = runtime::resident_bytes();
  constexpr int listed_ranks = 16;
  int largest = 0;
  std::vector<runtime::MemoryEstimate> estimates;
  for (int rank = 0; rank < schedule.p; ++rank) {
    estimates.push_back(runtime::estimate_memory(spec, schedule, rank, !comm::mpi_reaches_device_memory(), baseline));
    if (estimates.back().total() > estimates[largest].total()) largest = rank;
  }
  if (schedule.p <= listed_ranks) {
    for (int rank = 0; rank < schedule.p; ++rank) log::info("memory, rank {}: {}", rank, estimates[rank].describe());
  } else {
    log::info("memory, largest (rank {}): {}", largest, estimates[largest].describe());
  }
}

void print_plan(const LoadedDeck& loaded, const schedule::RunPlan& plan, const schedule::Schedule& schedule,
                const schedule::SimulationResult& result) {
  const auto& s = loaded.config.pipeline;
  const std::string source = plan.schedule_file.empty() ? "generated" : "read from " + printable(plan.schedule_file);
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
  log::info("transfers: {} of {} bytes each (b x boundary width x 4 B), {:.1f} MiB moved", result.transfers,
            plan.costs.bytes_per_transfer, static_cast<double>(result.bytes_moved) / (1 << 20));
  log::info("\n{}", schedule::summary_table(schedule, result));
  print_memory(loaded.config, schedule);
}

}  // namespace

int plan_command(const Environment& env, const PlanOptions& options) {
  const LoadedDeck loaded = load_deck(options.deck);
  require_writable(options.svg_path, "--svg");
  require_writable(options.trace_path, "--trace");
  require_writable(options.json_path, "--json");
  const schedule::RunPlan plan = schedule::run_plan(loaded.config);
  // A plan too large to draw is refused before it is generated: the SVG holds p·v·m boxes at least.
  if (!options.svg_path.empty()) {
    schedule::require_svg_fits(static_cast<double>(plan.spec.p) * plan.spec.v * plan.spec.m);
  }
  // simulate() makes the validator's cross-rank run as it goes.
  const schedule::Schedule schedule = schedule::make_schedule(plan, schedule::Checks::per_rank);
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

  print_plan(loaded, plan, schedule, result);
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
    out << schedule::summary_json(schedule, plan.costs, result, plan.data_parallel);
  });
  return 0;
}

}  // namespace kpipe::app
