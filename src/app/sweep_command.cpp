// kpipe sweep: short training runs over microbatch sizes b, each measured
// (samples/s, peak stashed activations) and calibrated; the simulator's
// prediction of every size from its measured per-action costs (a CostFit:
// interpolated between measured sizes, a fitted line beyond them) next to the
// measurement, and a recommendation (docs/performance-log.md,
// "Sweep and calibrated plan").

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <string_view>

#include "auto_microbatch_size.hpp"
#include "commands.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/runtime/training.hpp"
#include "kpipe/runtime/tuning/microbatch_sweep.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::app {

namespace {

constexpr double agreement = 0.05;  // the predicted best counts as right within 5% of the measured best's throughput

// A measured size and what the fitted costs predict for it (rank 0).
struct Row : runtime::SizeMeasurement {
  explicit Row(runtime::SizeMeasurement measured) : runtime::SizeMeasurement(std::move(measured)) {}
  double predicted_samples_per_second = 0.0;
  double predicted_step_seconds = 0.0;
  schedule::Bubble predicted_bubble;
};

std::size_t best(const std::vector<Row>& rows, double Row::*rate) {
  std::size_t at = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].*rate > rows[at].*rate) at = i;
  }
  return at;
}

// --sizes "4,8,16": positive integers separated by commas, none empty.
std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> sizes;
  for (std::size_t start = 0, item = 1; !text.empty(); ++item) {
    const std::size_t comma = text.find(',', start);
    const std::size_t last = comma == std::string::npos ? text.size() : comma;
    const std::string_view piece = std::string_view(text).substr(start, last - start);
    int b = 0;
    const auto [end, error] = std::from_chars(piece.data(), piece.data() + piece.size(), b);
    if (piece.empty() || error != std::errc() || end != piece.data() + piece.size() || b < 1) {
      throw input_error(fmt::format(
          "--sizes '{}': item {} {}; write positive integers separated by commas, e.g. 4,8,16", printable(text), item,
          piece.empty() ? "is empty" : fmt::format("'{}' is not a positive integer", printable(piece))));
    }
    sizes.push_back(b);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

}  // namespace

int sweep_command(const runtime::Environment& env, const SweepOptions& options) {
  const LoadedDeck base = load_deck(options.deck);
  require_writable(options.json_path, "--json");
  runtime::check_sweepable(base.config, "kpipe sweep");
  const std::vector<int> sizes = runtime::sizes_to_measure(base.config, parse_sizes(options.sizes));
  log::info("sweep: {} schedule, p = {}, d = {}, B = {}; b = {}; {} measured steps after 1 warm-up step each",
            base.config.pipeline.schedule, base.config.pipeline.stages, base.config.pipeline.data_parallel,
            base.config.train.global_batch, runtime::size_list(sizes), options.steps);

  std::vector<Row> rows;
  for (int b : sizes) {
    rows.emplace_back(runtime::measure_size(deck_at_size(base, b).config, options.steps));
    log::info("b = {:>4} (m = {:>4}): {:>10.0f} samples/s measured, peak activations {:.2f} MiB", b, rows.back().m,
              rows.back().measured_samples_per_second, rows.back().peak_activation_mib);
  }
  if (env.rank() != 0) return 0;

  std::vector<schedule::Calibration> calibrations;
  for (const Row& row : rows) calibrations.push_back(*row.calibration);
  const schedule::CostFit fit = schedule::fit_costs(calibrations);
  const int B = base.config.train.global_batch;
  for (Row& row : rows) {
    const schedule::CalibratedStep step =
        schedule::predict_step(row.schedule, fit.at(row.b), base.config.sim.max_in_flight);
    row.predicted_step_seconds = step.step_seconds;
    row.predicted_samples_per_second = B / step.step_seconds;
    row.predicted_bubble = step.bubble;
  }

  log::info("{:>6} {:>6} {:>17} {:>16} {:>21} {:>20} {:>15}", "b", "m", "predicted bubble", "measured bubble",
            "predicted samples/s", "measured samples/s", "peak act. MiB");
  for (const Row& row : rows) {
    log::info("{:>6} {:>6} {:>17.3f} {:>16.3f} {:>21.0f} {:>20.0f} {:>15.2f}", row.b, row.m,
              row.predicted_bubble.idle_over_useful, row.calibration->bubble.idle_over_useful,
              row.predicted_samples_per_second, row.measured_samples_per_second, row.peak_activation_mib);
  }
  const Row& measured_best = rows[best(rows, &Row::measured_samples_per_second)];
  const Row& predicted_best = rows[best(rows, &Row::predicted_samples_per_second)];
  const double ratio = predicted_best.measured_samples_per_second / measured_best.measured_samples_per_second;
  const bool agrees = ratio >= 1.0 - agreement;
  log::info(
      "recommendation: b = {} (measured best, {:.0f} samples/s); the fitted model predicts b = {} as best, "
      "which measured {:.0f} samples/s ({:.1f}% of the best): {}",
      measured_best.b, measured_best.measured_samples_per_second, predicted_best.b,
      predicted_best.measured_samples_per_second, 100.0 * ratio,
      predicted_best.b == measured_best.b ? "the same choice"
      : agrees                            ? "within 5%, they agree"
                                          : "more than 5% apart, prefer the measured best");
  log::info(
      "bubble = idle/useful; predicted by the simulator from each size's measured per-action costs (kpipe plan "
      "DECK --costs takes this file's --json: between measured sizes it interpolates, beyond them it fits "
      "fixed + per-sample x b)");

  write_output(options.json_path, "--json", [&](std::ostream& out) {
    nlohmann::json table = nlohmann::json::array();
    for (const Row& row : rows) {
      table.push_back({{"b", row.b},
                       {"m", row.m},
                       {"predicted_bubble", row.predicted_bubble.idle_over_useful},
                       {"measured_bubble", row.calibration->bubble.idle_over_useful},
                       {"predicted_step_seconds", row.predicted_step_seconds},
                       {"measured_step_seconds", B / row.measured_samples_per_second},
                       {"predicted_samples_per_second", row.predicted_samples_per_second},
                       {"measured_samples_per_second", row.measured_samples_per_second},
                       {"peak_activation_mib", row.peak_activation_mib},
                       {"calibration", nlohmann::json::parse(schedule::calibration_json(*row.calibration))}});
    }
    const nlohmann::json json = {{"command", "sweep"},
                                 {"deck", options.deck.path},
                                 {"schedule", base.config.pipeline.schedule},
                                 {"p", base.config.pipeline.stages},
                                 {"v", base.config.pipeline.virtual_stages},
                                 {"d", base.config.pipeline.data_parallel},
                                 {"global_batch", B},
                                 {"steps", options.steps},
                                 {"rows", table},
                                 {"cost_fit", nlohmann::json::parse(schedule::cost_fit_json(fit))},
                                 {"recommendation",
                                  {{"measured_best_b", measured_best.b},
                                   {"predicted_best_b", predicted_best.b},
                                   {"predicted_best_measured_fraction", ratio},
                                   {"agree_within_5_percent", agrees}}}};
    out << json.dump(2) << '\n';
  });
  return 0;
}

}  // namespace kpipe::app
