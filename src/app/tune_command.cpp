// kpipe tune: the whole configuration searched at once (issue: schedules v3).
// The deck as written is measured at several microbatch sizes to calibrate
// the costs of its layers (or --costs gives them), and every training
// schedule once at the deck's b for how fast its compute runs beside the
// deck's (a schedule that stashes more runs its kernels on colder caches).
// Then every training schedule, v, b and recomputation the deck's ranks can
// run is partitioned by those layer costs, predicted by the calibrated
// simulator and checked against the memory limit; the best few predictions
// are measured beside the deck as written, and the fastest measured is
// printed as deck keys (docs/performance-log.md, "kpipe tune").

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "auto_microbatch_size.hpp"
#include "commands.hpp"
#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/cost_file.hpp"
#include "kpipe/runtime/memory_estimate.hpp"
#include "kpipe/runtime/microbatch_sweep.hpp"
#include "kpipe/runtime/tuning.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::app {

namespace {

constexpr double agreement = 0.05;  // the predicted best counts as right within 5% of the measured best

// Per schedule: how much slower (> 1) or faster its compute runs than the deck's schedule's.
using Factors = std::map<std::string, double>;

struct Prediction {
  runtime::TuneCandidate candidate;
  runtime::TunePrediction predicted;
  double measured_step_seconds = 0.0;  // 0: not measured
};

LoadedDeck deck_of(const LoadedDeck& base, const runtime::TuneCandidate& candidate) {
  config::Deck deck = base.deck;
  for (const std::string& assignment : candidate.overrides()) deck = config::with_override(deck, assignment);
  config::RunConfig config = config::run_config(deck);
  return {std::move(deck), std::move(config)};
}

// The sizes the deck is calibrated at: every b from a quarter to four times
// the deck's that divides B/d and that its schedule takes. Candidates stay
// within them, where the fitted costs interpolate measured ones: beyond them
// a line in b misses the fixed costs that do not shrink with b.
std::vector<int> calibration_sizes(const LoadedDeck& base) {
  const int b = base.config.train.microbatch_size;
  std::vector<int> sizes;
  for (const int size : runtime::sizes_to_measure(base.config, {})) {
    if (4 * size < b || size > 4 * b) continue;
    try {
      deck_at_size(base, size);
      sizes.push_back(size);
    } catch (const Error&) {
    }
  }
  return sizes;
}

// Measures the deck at `sizes`; rank 0 holds the calibrations and fits them.
std::optional<schedule::CostFit> calibrate(const LoadedDeck& base, const std::vector<int>& sizes, int steps,
                                           double& deck_step_seconds) {
  std::vector<schedule::Calibration> runs;
  for (const int b : sizes) {
    const runtime::SizeMeasurement measured = runtime::measure_size(deck_at_size(base, b).config, steps);
    if (b == base.config.train.microbatch_size) {
      deck_step_seconds = base.config.train.global_batch / measured.measured_samples_per_second;
    }
    if (measured.calibration) runs.push_back(*measured.calibration);
  }
  if (runs.empty()) return std::nullopt;
  return schedule::fit_costs(runs);
}

// Σ F + B + W over the model stages of a calibration: one microbatch's compute.
double compute_per_microbatch(const schedule::Calibration& calibration) {
  double total = 0.0;
  for (const schedule::StageCosts& stage : calibration.stages) {
    total += stage.forward + stage.backward_input + stage.backward_weight;
  }
  return total;
}

// Per schedule: its compute per microbatch over the deck's
// (`deck_compute`), each measured at the deck's b with the FLOP-balanced
// partition (rank 0; empty elsewhere). A schedule that cannot run the deck's
// shape has none.
Factors schedule_factors(const LoadedDeck& base, double deck_compute, int steps) {
  Factors factors;
  const config::PipelineConfig& shape = base.config.pipeline;
  for (const std::string& name : schedule::schedule_names()) {
    const schedule::ScheduleInfo& info = schedule::find_schedule(name);
    if (!info.trains) continue;
    const auto takes = [&](int v) {
      return !info.check(
          {shape.stages, v, shape.microbatches, base.config.train.microbatch_size, shape.data_parallel, {}});
    };
    const int v = takes(1) ? 1 : takes(2) ? 2 : 0;  // the fewest chunks the schedule takes
    if (v == 0) continue;
    config::RunConfig config;
    try {
      config::Deck deck = config::with_override(base.deck, "pipeline.schedule=" + name);
      deck = config::with_override(deck, fmt::format("pipeline.virtual_stages={}", v));
      config = config::run_config(config::with_override(deck, "pipeline.partition=[]"));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::input) throw;
      continue;
    }
    const runtime::SizeMeasurement measured = runtime::measure_size(config, steps);
    if (measured.calibration) factors[name] = compute_per_microbatch(*measured.calibration) / deck_compute;
  }
  return factors;
}

// Every candidate with b in the fit's measured range that the ranks can run
// and the memory holds, fastest predicted first (rank 0).
std::vector<Prediction> predict(const LoadedDeck& base, const schedule::CostFit& fit, const Factors& factors,
                                double limit_mib) {
  const config::RunConfig& config = base.config;
  const auto layers = runtime::layer_costs(fit, config);
  const std::int64_t baseline = runtime::resident_bytes();
  std::vector<Prediction> predictions;
  const auto measured = [&fit](int b) {
    return fit.sizes.empty() || (b >= *std::min_element(fit.sizes.begin(), fit.sizes.end()) &&
                                 b <= *std::max_element(fit.sizes.begin(), fit.sizes.end()));
  };
  for (runtime::TuneCandidate candidate : runtime::tune_shapes(config)) {
    if (!measured(candidate.b)) continue;
    candidate.partition = runtime::cost_balanced_partition(layers, candidate.b, candidate.recompute,
                                                           config.pipeline.stages * candidate.v);
    try {
      const auto found = factors.find(candidate.schedule);
      const double factor = found == factors.end() ? 1.0 : found->second;
      const runtime::TunePrediction predicted =
          runtime::predict_candidate(deck_of(base, candidate).config, fit, layers, candidate, factor, baseline);
      candidate.partition = predicted.partition;
      if (limit_mib > 0 && predicted.largest_peak_mib() > limit_mib) continue;
      predictions.push_back({candidate, predicted, 0.0});
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::input) throw;  // a shape the deck's other keys refuse is no candidate
    }
  }
  std::stable_sort(predictions.begin(), predictions.end(), [](const Prediction& a, const Prediction& b) {
    return a.predicted.step_seconds < b.predicted.step_seconds;
  });
  return predictions;
}

// The candidates rank 0 chose, as numbers every rank can rebuild them from.
std::vector<int> encode(const std::vector<Prediction>& chosen) {
  const auto names = schedule::schedule_names();
  std::vector<int> codes = {static_cast<int>(chosen.size())};
  for (const Prediction& p : chosen) {
    const auto& c = p.candidate;
    codes.push_back(static_cast<int>(std::find(names.begin(), names.end(), c.schedule) - names.begin()));
    codes.insert(codes.end(),
                 {c.v, c.b, static_cast<int>(c.recompute), c.extra_warmup, static_cast<int>(c.partition.size())});
    codes.insert(codes.end(), c.partition.begin(), c.partition.end());
  }
  return codes;
}

std::vector<runtime::TuneCandidate> decode(const std::vector<int>& codes) {
  const auto names = schedule::schedule_names();
  std::vector<runtime::TuneCandidate> candidates;
  std::size_t at = 1;
  for (int k = 0; k < codes[0]; ++k) {
    runtime::TuneCandidate c{names[static_cast<std::size_t>(codes[at])],
                             codes[at + 1],
                             codes[at + 2],
                             static_cast<config::Recompute>(codes[at + 3]),
                             {},
                             codes[at + 4]};
    const int stages = codes[at + 5];
    at += 6;
    c.partition.assign(codes.begin() + static_cast<std::ptrdiff_t>(at),
                       codes.begin() + static_cast<std::ptrdiff_t>(at + stages));
    at += static_cast<std::size_t>(stages);
    candidates.push_back(std::move(c));
  }
  return candidates;
}

std::string snippet(const runtime::TuneCandidate& c) {
  return fmt::format(
      "pipeline.schedule = \"{}\"\npipeline.virtual_stages = {}\ntrain.microbatch_size = {}\n"
      "pipeline.recompute = \"{}\"\npipeline.partition = [{}]\n{}",
      c.schedule, c.v, c.b, config::name_of(c.recompute), fmt::join(c.partition, ", "),
      schedule::find_schedule(c.schedule).takes_extra_warmup
          ? fmt::format("pipeline.extra_warmup = {}\n", c.extra_warmup)
          : "");
}

nlohmann::json row_json(const Prediction& p) {
  nlohmann::json row = {{"schedule", p.candidate.schedule},
                        {"v", p.candidate.v},
                        {"b", p.candidate.b},
                        {"recompute", std::string(config::name_of(p.candidate.recompute))},
                        {"extra_warmup", p.candidate.extra_warmup},
                        {"partition", p.candidate.partition},
                        {"predicted_step_seconds", p.predicted.step_seconds},
                        {"predicted_bubble", p.predicted.bubble.idle_over_useful},
                        {"peak_mib_per_rank", p.predicted.peak_mib}};
  if (p.measured_step_seconds > 0) row["measured_step_seconds"] = p.measured_step_seconds;
  return row;
}

}  // namespace

int tune_command(const runtime::Environment& env, const TuneOptions& options) {
  const LoadedDeck base = load_deck(options.deck);
  if (!options.costs_path.empty()) protect_input(options.costs_path);
  require_writable(options.json_path, "--json");
  runtime::check_sweepable(base.config, "kpipe tune");
  const config::RunConfig& config = base.config;
  // What kpipe run would check each candidate against, as it does.
  const comm::ProcessGrid grid(comm::world(), config.pipeline.stages, config.pipeline.tensor_parallel,
                               config.pipeline.data_parallel);
  const double limit_mib =
      static_cast<double>(runtime::run_memory_limit(config, grid.ranks_on_node()).bytes) / (1 << 20);
  log::info(
      "tune: p = {}, t = {}, d = {}, B = {}; schedules x v x b x recomputation, partitions balanced by "
      "measured layer costs; the best {} measured for {} steps each beside the deck as written",
      config.pipeline.stages, config.pipeline.tensor_parallel, config.pipeline.data_parallel, config.train.global_batch,
      options.top, options.steps);

  const comm::Watchdog watchdog(config.runtime.watchdog_seconds, env.rank());
  double deck_step_seconds = 0.0;
  std::optional<schedule::CostFit> fit;
  if (options.costs_path.empty()) {
    const std::vector<int> sizes = calibration_sizes(base);
    log::info("calibrating the deck at b = {}", runtime::size_list(sizes));
    fit = calibrate(base, sizes, options.steps, deck_step_seconds);
  } else {
    // Rank 0 reads (it holds the calibrations); an error there ends every rank with its line.
    comm::collectively(comm::world(), watchdog, "reading --costs", [&] {
      if (env.rank() == 0) fit = runtime::read_cost_file(options.costs_path);
    });
    deck_step_seconds =
        config.train.global_batch / runtime::measure_size(config, options.steps).measured_samples_per_second;
  }

  Factors factors;
  if (options.costs_path.empty()) {
    log::info("measuring each schedule at b = {} for its compute beside the deck's", config.train.microbatch_size);
    double deck_compute = 0.0;
    if (env.rank() == 0) {
      for (const schedule::Calibration& run : fit->runs) {
        if (run.microbatch_size == config.train.microbatch_size) deck_compute = compute_per_microbatch(run);
      }
    }
    factors = schedule_factors(base, deck_compute, options.steps);
  }
  std::vector<Prediction> predictions;
  comm::collectively(comm::world(), watchdog, "predicting the candidates", [&] {
    if (env.rank() != 0) return;
    predictions = predict(base, *fit, factors, limit_mib);
    if (predictions.empty()) throw input_error("kpipe tune: no candidate fits; raise runtime.memory_limit_mib");
  });
  const auto top = static_cast<std::size_t>(options.top);
  std::vector<int> chosen =
      encode(std::vector<Prediction>(predictions.begin(), predictions.begin() + std::min(top, predictions.size())));
  std::vector<int> length = {static_cast<int>(chosen.size())};  // other ranks hold no predictions
  comm::broadcast(comm::world(), 0, length);
  chosen.resize(static_cast<std::size_t>(length[0]));
  comm::broadcast(comm::world(), 0, chosen);
  const auto candidates = decode(chosen);
  std::vector<double> measured;
  for (const auto& candidate : candidates) {
    const auto result = runtime::measure_size(deck_of(base, candidate).config, options.steps);
    measured.push_back(config.train.global_batch / result.measured_samples_per_second);
    log::info("measured {}: {:.3f} ms per step", candidate.describe(), 1e3 * measured.back());
  }
  if (env.rank() != 0) return 0;
  for (std::size_t k = 0; k < measured.size(); ++k) predictions[k].measured_step_seconds = measured[k];

  log::info("{:>4} {:<44} {:>13} {:>13} {:>16} {:>13}", "rank", "candidate", "predicted ms", "measured ms",
            "pred. bubble", "peak MiB (max)");
  const std::size_t shown = std::min<std::size_t>(predictions.size(), std::max<std::size_t>(top, 10));
  for (std::size_t k = 0; k < shown; ++k) {
    const Prediction& p = predictions[k];
    log::info("{:>4} {:<44} {:>13.3f} {:>13} {:>16.3f} {:>13.1f}", k + 1, p.candidate.describe(),
              1e3 * p.predicted.step_seconds,
              p.measured_step_seconds > 0 ? fmt::format("{:.3f}", 1e3 * p.measured_step_seconds) : "-",
              p.predicted.bubble.idle_over_useful, p.predicted.largest_peak_mib());
  }
  if (predictions.size() > shown)
    log::info("... and {} candidates more (--json has them all)", predictions.size() - shown);
  log::info("the deck as written ({} {} v={} b={}): {:.3f} ms per step measured", options.deck.path,
            config.pipeline.schedule, config.pipeline.virtual_stages, config.train.microbatch_size,
            1e3 * deck_step_seconds);

  std::size_t fastest = 0;
  for (std::size_t k = 1; k < measured.size(); ++k) {
    if (measured[k] < measured[fastest]) fastest = k;
  }
  const double predicted_best_ratio = measured[fastest] / measured[0];
  log::info("the predicted best measured {:.3f} ms, the measured best ({}) {:.3f} ms: {}", 1e3 * measured[0],
            predictions[fastest].candidate.describe(), 1e3 * measured[fastest],
            fastest == 0                              ? "the same candidate"
            : predicted_best_ratio >= 1.0 - agreement ? "within 5%, they agree"
                                                      : "more than 5% apart");
  const bool deck_wins = deck_step_seconds < measured[fastest];
  if (deck_wins) {
    log::info("winner: the deck as written ({:.3f} ms per step) is faster than every measured candidate; keep it",
              1e3 * deck_step_seconds);
  } else {
    log::info("winner ({:.1f}% faster than the deck as written), as deck keys:\n{}",
              100.0 * (deck_step_seconds / measured[fastest] - 1.0), snippet(predictions[fastest].candidate));
  }

  write_output(options.json_path, "--json", [&](std::ostream& out) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Prediction& p : predictions) rows.push_back(row_json(p));
    nlohmann::json json = {{"command", "tune"},
                           {"deck", options.deck.path},
                           {"steps", options.steps},
                           {"deck_measured_step_seconds", deck_step_seconds},
                           {"memory_limit_mib", limit_mib},
                           {"candidates", rows},
                           {"predicted_best_measured_ratio", predicted_best_ratio},
                           {"agree_within_5_percent", predicted_best_ratio >= 1.0 - agreement},
                           {"winner", deck_wins ? nlohmann::json("deck") : row_json(predictions[fastest])},
                           {"cost_fit", nlohmann::json::parse(schedule::cost_fit_json(*fit))}};
    out << json.dump(2) << '\n';
  });
  return 0;
}

}  // namespace kpipe::app
