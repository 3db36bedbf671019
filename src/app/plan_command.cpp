// kpipe plan: build, validate and simulate a deck's schedule without any
// compute, and report it (DESIGN.md §7).

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "commands.hpp"
#include "output_file.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "kpipe/schedule/render.hpp"

namespace kpipe::app {

namespace {

int terminal_columns() {
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    if (const int n = std::atoi(columns); n > 0) return n;
  }
  return 120;
}

std::string bubble_line(const char* what, const schedule::Bubble& bubble) {
  return fmt::format("{:<34} idle/useful = {:.4f} ({:.1f}%)   idle/total = {:.4f} ({:.1f}%)", what,
                     bubble.idle_over_useful, 100.0 * bubble.idle_over_useful, bubble.idle_over_total,
                     100.0 * bubble.idle_over_total);
}

void print_plan(const LoadedDeck& loaded, const schedule::RunPlan& plan, const schedule::Schedule& schedule,
                const schedule::SimulationResult& result) {
  const auto& s = loaded.config.pipeline;
  const std::string source = plan.schedule_file.empty() ? "generated" : "read from " + plan.schedule_file;
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
  log::info("transfers: {} of {} bytes each (b x widest layer x 4 B), {:.1f} MiB moved", result.transfers,
            plan.costs.bytes_per_transfer, static_cast<double>(result.bytes_moved) / (1 << 20));
  log::info("\n{}", schedule::summary_table(schedule, result));
}

}  // namespace

int plan_command(const Environment& env, const PlanOptions& options) {
  const LoadedDeck loaded = load_deck(options.deck);
  require_writable(options.svg_path, "--svg");
  require_writable(options.trace_path, "--trace");
  require_writable(options.json_path, "--json");
  const schedule::RunPlan plan = schedule::run_plan(loaded.config);
  // simulate() makes the validator's cross-rank run as it goes.
  const schedule::Schedule schedule = schedule::make_schedule(plan, schedule::Checks::per_rank);
  // Every action's time is kept only when a timeline will be drawn.
  const int columns = terminal_columns();
  const bool ascii = options.ascii && schedule::ascii_timeline_can_fit(schedule, columns);
  const bool timelines = ascii || !options.svg_path.empty() || !options.trace_path.empty();
  const schedule::SimulationResult result =
      schedule::simulate(schedule, plan.costs, timelines ? schedule::Record::every_action : schedule::Record::summary);

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
