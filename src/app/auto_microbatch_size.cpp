#include "auto_microbatch_size.hpp"

#include <fmt/format.h>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"

namespace kpipe::app {

namespace {

// Steps per size when kpipe run settles "auto": enough to rank the sizes,
// few enough to cost a small share of a run.
constexpr int auto_steps = 3;

}  // namespace

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

std::optional<runtime::SizeMeasurement> measured_if_it_fits(const config::RunConfig& config, int steps,
                                                            const std::string& what) {
  try {
    return runtime::measure_size(config, steps);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::input) throw;
    log::info("{}: skipped ({})", what, e.what());
    return std::nullopt;
  }
}

LoadedDeck with_measured_microbatch_size(LoadedDeck loaded) {
  const config::RunConfig& config = loaded.config;
  if (!config.train.microbatch_size_auto) return loaded;
  const char* who = "train.microbatch_size = \"auto\"";
  runtime::check_sweepable(config, who);
  const int per_replica = config.train.global_batch / config.pipeline.data_parallel;
  std::vector<int> sizes;
  for (int b : runtime::sizes_to_measure(config, {})) {
    if (per_replica / b >= config.pipeline.model_stages()) sizes.push_back(b);
  }
  log::info("{}: measuring b = {}, {} steps each after 1 warm-up step", who, runtime::size_list(sizes), auto_steps);
  int best = 0;
  double best_rate = 0.0;
  for (int b : sizes) {
    const auto measured = measured_if_it_fits(deck_at_size(loaded, b).config, auto_steps, fmt::format("b = {:>4}", b));
    if (!measured) continue;
    const double rate = measured->measured_samples_per_second;
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
                    who, runtime::size_list(sizes)));
  }
  log::info("{}: training with b = {} ({:.0f} samples/s measured)", who, best, best_rate);
  return deck_at_size(loaded, best);
}

}  // namespace kpipe::app
