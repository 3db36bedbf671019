#include "microbatch_sweep.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "calibration_recorder.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/schedule/registry.hpp"
#include "training.hpp"

namespace kpipe::app {

namespace {

// Steps per size when kpipe run settles "auto": enough to rank the sizes,
// few enough to cost a small share of a run.
constexpr int auto_steps = 3;

}  // namespace

std::string size_list(const std::vector<int>& sizes) {
  std::string out;
  for (int b : sizes) out += (out.empty() ? "" : ", ") + std::to_string(b);
  return out;
}

void check_sweepable(const config::RunConfig& config, const char* who) {
  if (!config.pipeline.schedule_entry->trains) {
    throw input_error(fmt::format(
        "{} measures training steps, but pipeline.schedule = \"{}\" runs inference only; choose a training schedule",
        who, config.pipeline.schedule));
  }
  if (!config.pipeline.schedule_file.empty()) {
    throw input_error(fmt::format(
        "pipeline.schedule_file = \"{}\" fixes m, so {} cannot vary b; leave the schedule file out (the generated {} "
        "schedule) or give train.microbatch_size a number",
        printable(config.pipeline.schedule_file), who, config.pipeline.schedule));
  }
}

std::vector<int> sizes_to_measure(const config::RunConfig& config, const std::vector<int>& requested) {
  const int per_replica = config.train.global_batch / config.pipeline.data_parallel;
  std::vector<int> valid;
  for (int b = 1; b <= per_replica; ++b) {
    if (per_replica % b == 0) valid.push_back(b);
  }
  if (requested.empty()) return valid;
  std::vector<int> sizes;
  for (int b : requested) {
    if (per_replica % b != 0) {
      throw input_error(fmt::format(
          "--sizes: b = {} does not divide B/d = {}/{} = {}, so m would not be an integer; valid sizes are {}", b,
          config.train.global_batch, config.pipeline.data_parallel, per_replica, size_list(valid)));
    }
    if (std::find(sizes.begin(), sizes.end(), b) == sizes.end()) sizes.push_back(b);
  }
  return sizes;
}

LoadedDeck deck_at_size(const LoadedDeck& loaded, int b) {
  try {
    config::Deck deck = config::with_override(loaded.deck, fmt::format("train.microbatch_size={}", b));
    config::RunConfig config = config::run_config(deck);
    return {std::move(deck), std::move(config)};
  } catch (const Error& e) {
    // The schedule's own rules (e.g. interleaved needs m >= p) fail alike on every rank.
    throw input_error(fmt::format("b = {}: {}", b, e.what()));
  }
}

SizeMeasurement measure_size(const config::RunConfig& config, int steps) {
  const auto pipeline = build_pipeline(config, runtime::Mode::train);
  CalibrationRecorder recorder(*pipeline);
  comm::barrier(comm::world());
  const double start = comm::wall_time();
  double measured_seconds = 0.0;
  for (int step = 0; step <= steps; ++step) {
    const double step_start = comm::wall_time();
    const runtime::StepResult result = abort_on_error([&] { return pipeline->run_step(step); });
    runtime::global_loss(pipeline->grid(), result);  // as kpipe run does in every step
    const double seconds = comm::wall_time() - step_start;
    recorder.add_step(step_start - start, seconds, result);
    if (step > 0) measured_seconds += seconds;
  }
  SizeMeasurement size;
  size.b = config.train.microbatch_size;
  size.m = pipeline->schedule().m;
  size.schedule = pipeline->schedule();
  size.measured_samples_per_second = config.train.global_batch * steps / measured_seconds;
  size.peak_activation_mib =
      comm::max(comm::world(), static_cast<double>(peak_stashed_bytes(*pipeline))) / double(1 << 20);
  size.calibration = recorder.finish();
  std::vector<double> rate = {size.measured_samples_per_second};
  comm::broadcast(comm::world(), 0, rate);
  size.measured_samples_per_second = rate.front();
  return size;
}

LoadedDeck with_measured_microbatch_size(LoadedDeck loaded) {
  const config::RunConfig& config = loaded.config;
  if (!config.train.microbatch_size_auto) return loaded;
  const char* who = "train.microbatch_size = \"auto\"";
  check_sweepable(config, who);
  const int per_replica = config.train.global_batch / config.pipeline.data_parallel;
  std::vector<int> sizes;
  for (int b : sizes_to_measure(config, {})) {
    if (per_replica / b >= config.pipeline.model_stages()) sizes.push_back(b);
  }
  log::info("{}: measuring b = {}, {} steps each after 1 warm-up step", who, size_list(sizes), auto_steps);
  int best = 0;
  double best_rate = 0.0;
  for (int b : sizes) {
    double rate = 0.0;
    try {
      rate = measure_size(deck_at_size(loaded, b).config, auto_steps).measured_samples_per_second;
    } catch (const Error& e) {
      // A size the schedule or the memory cannot take fails alike on every rank.
      if (e.kind() != ErrorKind::input) throw;
      log::info("b = {:>4}: skipped ({})", b, e.what());
      continue;
    }
    log::info("b = {:>4} (m = {:>4}): {:>10.0f} samples/s", b, per_replica / b, rate);
    if (rate > best_rate) {
      best = b;
      best_rate = rate;
    }
  }
  if (best == 0) {
    throw input_error(
        fmt::format("{}: no microbatch size from {} could run this deck; give train.microbatch_size a "
                    "number (kpipe deck names the problem of each)",
                    who, size_list(sizes)));
  }
  log::info("{}: training with b = {} ({:.0f} samples/s measured)", who, best, best_rate);
  return deck_at_size(loaded, best);
}

}  // namespace kpipe::app
