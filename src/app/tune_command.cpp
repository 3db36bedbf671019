// kpipe tune: the whole configuration searched at once (issue: schedules v3).
// The deck as written is measured at several microbatch sizes to calibrate
// the costs of its layers (or --costs gives them), and every training
// schedule once at the deck's b for how fast its compute runs beside the
// deck's (a schedule that stashes more runs its kernels on colder caches).
// Then every training schedule, v, b and recomputation the deck's ranks can
// run is partitioned by those layer costs, predicted by the calibrated
// simulator and checked against the memory limit; the best few predictions
// are measured beside the deck as written and the deck with full
// recomputation (the naive way to fit), each with its peak resident memory,
// and the fastest measured under the limit is printed as deck keys
// (docs/performance-log.md, "kpipe tune"). Sizes and schedules the limit
// refuses are left out of the calibration.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
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
#include "kpipe/runtime/measurement/cost_file.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/runtime/tuning/microbatch_sweep.hpp"
#include "kpipe/runtime/tuning/tuning.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::app {

namespace {

constexpr double agreement = 0.05;  // the predicted best counts as right within 5% of the measured best
constexpr double infinity = std::numeric_limits<double>::infinity();  // a candidate that could not be measured

// Per schedule: how much slower (> 1) or faster its compute runs than the deck's schedule's.
using Factors = std::map<std::string, double>;

struct Prediction {
  runtime::TuneCandidate candidate;
  runtime::TunePrediction predicted;
  double measured_step_seconds = 0.0;  // 0: not measured
  double measured_peak_mib = 0.0;      // the largest rank's peak resident memory, where measured
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
  bool any = false;
  for (const int b : sizes) {
    const auto measured = measured_if_it_fits(deck_at_size(base, b).config, steps, fmt::format("b = {}", b));
    if (!measured) continue;
    any = true;
    if (b == base.config.train.microbatch_size) {
      deck_step_seconds = base.config.train.global_batch / measured->measured_samples_per_second;
    }
    if (measured->calibration) runs.push_back(*measured->calibration);
  }
  if (!any) {
    throw input_error(
        fmt::format("kpipe tune calibrates the deck as written at b = {}, and none fits runtime.memory_limit_mib; set "
                    "pipeline.recompute = \"full\" in the deck (or raise the limit) so that one does",
                    runtime::size_list(sizes)));
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
  for (const std::string& name : schedule::schedule_names()) {
    const schedule::ScheduleInfo& info = schedule::find_schedule(name);
    if (!info.trains) continue;
    const int v = runtime::chunks_taken(info, base.config, {1, 2});  // the fewest chunks the schedule takes
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
    const auto measured = measured_if_it_fits(config, steps, name);
    if (measured && measured->calibration)
      factors[name] = compute_per_microbatch(*measured->calibration) / deck_compute;
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
    codes.insert(codes.end(), {c.v, c.b, static_cast<int>(c.recompute), c.extra_warmup, c.distributed ? 1 : 0,
                               static_cast<int>(c.partition.size())});
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
                             codes[at + 4],
                             codes[at + 5] != 0};
    const int stages = codes[at + 6];
    at += 7;
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
      "pipeline.recompute = \"{}\"\npipeline.partition = [{}]\n{}{}",
      c.schedule, c.v, c.b, config::name_of(c.recompute), fmt::join(c.partition, ", "),
      schedule::find_schedule(c.schedule).takes_extra_warmup
          ? fmt::format("pipeline.extra_warmup = {}\n", c.extra_warmup)
          : "",
      c.distributed ? "train.distributed_optimizer = true\n" : "");
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
  if (p.measured_step_seconds > 0) {
    row["measured_step_seconds"] = p.measured_step_seconds;
    row["measured_peak_mib"] = p.measured_peak_mib;
  }
  row["distributed_optimizer"] = p.candidate.distributed;
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
    if (const auto deck = measured_if_it_fits(config, options.steps, "the deck as written")) {
      deck_step_seconds = config.train.global_batch / deck->measured_samples_per_second;
    }
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
  // Each chosen candidate, and the deck with full recomputation (the naive
  // way to fit a limit), with the largest rank's peak resident memory.
  std::vector<double> measured, peaks;
  for (const auto& candidate : candidates) {
    const auto result = measured_if_it_fits(deck_of(base, candidate).config, options.steps, candidate.describe());
    measured.push_back(result ? config.train.global_batch / result->measured_samples_per_second : infinity);
    peaks.push_back(result ? result->peak_resident_mib : 0.0);
    if (result) {
      log::info("measured {}: {:.3f} ms per step, peak resident {:.1f} MiB (largest rank)", candidate.describe(),
                1e3 * measured.back(), peaks.back());
    }
  }
  std::optional<runtime::SizeMeasurement> full;
  if (config.pipeline.recompute != config::Recompute::full) {
    full = measured_if_it_fits(config::run_config(config::with_override(base.deck, "pipeline.recompute=full")),
                               options.steps, "the deck with pipeline.recompute = \"full\"");
  }
  if (env.rank() != 0) return 0;
  for (std::size_t k = 0; k < measured.size(); ++k) {
    predictions[k].measured_step_seconds = std::isfinite(measured[k]) ? measured[k] : 0.0;
    predictions[k].measured_peak_mib = peaks[k];
  }

  log::info("{:>4} {:<44} {:>13} {:>13} {:>13} {:>16} {:>13}", "rank", "candidate", "predicted ms", "measured ms",
            "pred. bubble", "pred. peak MiB", "meas. peak");
  const std::size_t shown = std::min<std::size_t>(predictions.size(), std::max<std::size_t>(top, 10));
  for (std::size_t k = 0; k < shown; ++k) {
    const Prediction& p = predictions[k];
    const bool measured_here = p.measured_step_seconds > 0;
    log::info("{:>4} {:<44} {:>13.3f} {:>13} {:>13.3f} {:>16.1f} {:>13}", k + 1, p.candidate.describe(),
              1e3 * p.predicted.step_seconds,
              measured_here ? fmt::format("{:.3f}", 1e3 * p.measured_step_seconds) : "-",
              p.predicted.bubble.idle_over_useful, p.predicted.largest_peak_mib(),
              measured_here ? fmt::format("{:.1f}", p.measured_peak_mib) : "-");
  }
  if (predictions.size() > shown)
    log::info("... and {} candidates more (--json has them all)", predictions.size() - shown);
  const std::string deck_shape = fmt::format("{} {} v={} b={} recompute={}", options.deck.path,
                                             config.pipeline.schedule, config.pipeline.virtual_stages,
                                             config.train.microbatch_size, config::name_of(config.pipeline.recompute));
  if (deck_step_seconds > 0) {
    log::info("the deck as written ({}): {:.3f} ms per step measured", deck_shape, 1e3 * deck_step_seconds);
  } else {
    log::info("the deck as written ({}): does not fit {:.1f} MiB per rank, not measured", deck_shape, limit_mib);
  }
  if (full) {
    log::info("the deck with pipeline.recompute = \"full\": {:.3f} ms per step, peak resident {:.1f} MiB",
              1e3 * config.train.global_batch / full->measured_samples_per_second, full->peak_resident_mib);
  }

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
  // The winner: the fastest measured whose peak stayed within the limit.
  std::optional<std::size_t> winner;
  for (std::size_t k = 0; k < measured.size(); ++k) {
    if (!std::isfinite(measured[k]) || peaks[k] > limit_mib) continue;
    if (!winner || measured[k] < measured[*winner]) winner = k;
  }
  if (!winner) {
    throw input_error(fmt::format(
        "kpipe tune: no measured candidate stayed within {:.1f} MiB per rank; raise runtime.memory_limit_mib or "
        "measure more with --top",
        limit_mib));
  }
  const Prediction& best = predictions[*winner];
  const bool deck_wins = deck_step_seconds > 0 && deck_step_seconds < measured[*winner];
  if (deck_wins) {
    log::info("winner: the deck as written ({:.3f} ms per step) is faster than every measured candidate; keep it",
              1e3 * deck_step_seconds);
  } else {
    const std::string faster = deck_step_seconds > 0
                                   ? fmt::format("{:.1f}% faster than the deck as written",
                                                 100.0 * (deck_step_seconds / measured[*winner] - 1.0))
                                   : "the deck as written does not fit";
    log::info("winner ({}; peak resident {:.1f} MiB measured, predicted per rank {:.1f} MiB), as deck keys:\n{}",
              faster, best.measured_peak_mib, fmt::join(best.predicted.peak_mib, ", "), snippet(best.candidate));
  }
  write_output(options.json_path, "--json", [&](std::ostream& out) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Prediction& p : predictions) rows.push_back(row_json(p));
    nlohmann::json json = {{"command", "tune"},
                           {"deck", options.deck.path},
                           {"steps", options.steps},
                           {"deck_measured_step_seconds", deck_step_seconds},
                           {"full_recompute_measured_step_seconds",
                            full ? config.train.global_batch / full->measured_samples_per_second : 0.0},
                           {"full_recompute_peak_mib", full ? full->peak_resident_mib : 0.0},
                           {"memory_limit_mib", limit_mib},
                           {"candidates", rows},
                           {"predicted_best_measured_ratio", predicted_best_ratio},
                           {"agree_within_5_percent", predicted_best_ratio >= 1.0 - agreement},
                           {"winner", deck_wins ? nlohmann::json("deck") : row_json(best)},
                           {"cost_fit", nlohmann::json::parse(schedule::cost_fit_json(*fit))}};
    out << json.dump(2) << '\n';
  });
  return 0;
}

}  // namespace kpipe::app
