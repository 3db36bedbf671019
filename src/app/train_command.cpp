// `kpipe run` and `kpipe infer`: pipelined training and forward-only
// evaluation of a deck on p · d MPI ranks.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "auto_microbatch_size.hpp"
#include "commands.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/signals.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/measurement/profile_recorder.hpp"
#include "kpipe/runtime/measurement/run_report.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/runtime/preemption.hpp"
#include "kpipe/runtime/session.hpp"
#include "kpipe/runtime/training.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::app {

namespace {

using Pipeline = runtime::Pipeline<float>;

std::string duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

void print_setup(const Pipeline& pipeline, const char* what) {
  const auto& s = pipeline.schedule();
  const auto& spec = pipeline.spec();
  log::info("{}", pipeline.grid().layout());
  const std::vector<std::string>& hosts = pipeline.grid().hosts();
  if (const std::string placed = comm::host_layout(hosts); !placed.empty()) log::info("{}", placed);
  const int t = pipeline.grid().tensor_size();
  if (const int split = comm::first_split_tensor_group(hosts, t); split >= 0) {
    log::warning(
        "the tensor group of world ranks {}..{} spans hosts: its activations cross the network in every layer; "
        "place t = {} consecutive ranks on each host",
        split, split + t - 1, t);
  }
  log::info("{}: {} schedule, p = {}, v = {}, m = {} microbatches of {} samples, {} layers, transfers {}", what, s.name,
            s.p, s.v, s.m, spec.microbatch_size, spec.model.layer_count(),
            pipeline.transport().staged() ? "staged through host memory" : "direct");
}

// Synthetic data: train.steps batches. A dataset: its whole test split in
// order, in batches of train.global_batch (a last partial batch is left out).
int inference_batches(const Pipeline& pipeline, const config::RunConfig& config) {
  const std::int64_t samples = pipeline.data_samples();
  if (samples == 0) return config.train.steps;
  const std::int64_t B = config.train.global_batch;
  if (samples < B) {
    throw input_error(
        fmt::format("data.path = \"{}\" has {} test samples, fewer than train.global_batch = {}; "
                    "lower train.global_batch to at most {}",
                    config.data.path, samples, B, samples));
  }
  // A language model's held-out samples are windows of T tokens of its validation split.
  const char* what = config.model.token_sequences() ? "validation sequences" : "test samples";
  log::info(
      "data: the {} {} of {} in {} batches of {} (train.steps is not used){}", samples, what,
      runtime::data_source_kind(config.data.source).path_holds.empty() ? "the synthetic stream" : config.data.path,
      samples / B, B,
      samples % B ? fmt::format("; the last {} do not fill a batch and are left out", samples % B) : "");
  return static_cast<int>(samples / B);
}

// Characters per token of a language model's validation text (1 for
// characters), for its loss in bits per character.
double validation_characters_per_token(const Pipeline& pipeline, const config::RunConfig& config) {
  if (!pipeline.spec().model.token_sequences()) return 1.0;
  return runtime::characters_per_token(config.data, pipeline.spec());
}

// "loss 1.234567 (1.781 bits per token)" for a language model, with bits per
// character for subword tokens, "loss 1.234567" otherwise.
std::string loss_text(const Pipeline& pipeline, double loss, double characters_per_token) {
  if (!pipeline.spec().model.token_sequences()) return fmt::format("loss {:.6f}", loss);
  const double bits = loss / std::log(2.0);
  if (characters_per_token == 1.0) return fmt::format("loss {:.6f} ({:.4f} bits per token)", loss, bits);
  return fmt::format("loss {:.6f} ({:.4f} bits per token, {:.4f} bits per character at {:.3f} characters a token)",
                     loss, bits, bits / characters_per_token, characters_per_token);
}

// What train.on_nonfinite = "skip", fp16 loss scaling and train.post_validation did over the run.
void log_updates(const Pipeline& pipeline, int steps) {
  const auto& update = *pipeline.update();
  const bool scaled = update.loss_scaler().enabled();
  if (update.skipped() > 0) {
    log::info("updates: {} of {} steps skipped ({})", update.skipped(), steps,
              scaled ? "float16 overflows" : "train.on_nonfinite = \"skip\"");
  }
  if (scaled) log::info("loss scale: {} for the next step", update.loss_scale());
  if (pipeline.spec().optimizer.post_validation) {
    log::info(
        "post-validation: {} of {} updates rolled back and redone with the global clip factor (the previous "
        "step's factor was the guess)",
        update.redone(), steps - update.skipped());
  }
}

// What the training data is and how many times the steps read it.
void log_training_data(const Pipeline& pipeline, const config::RunConfig& config) {
  const int steps = config.train.steps;
  const double samples_per_step = pipeline.spec().global_batch;
  const model::ModelSpec& model = pipeline.spec().model;
  if (const std::int64_t samples = pipeline.data_samples(); model.token_sequences()) {
    // Token streams hand out windows at random offsets: "epochs" are in tokens.
    const std::int64_t tokens = samples * model.context;
    log::info(
        "data: {} training tokens ({}), {} per step in sequences of {} at seeded random offsets; {} steps read "
        "{:.2f} times the split",
        tokens,
        runtime::data_source_kind(config.data.source).path_holds.empty() ? "synthetic Markov chain" : config.data.path,
        samples_per_step * model.context, model.context, steps,
        steps * samples_per_step * model.context / static_cast<double>(std::max<std::int64_t>(1, tokens)));
  } else if (samples > 0) {
    log::info("data: {} training samples from {}, reshuffled every epoch of {:.2f} steps; {} steps are {:.2f} epochs",
              samples, config.data.path, samples / samples_per_step, steps,
              steps * samples_per_step / static_cast<double>(samples));
  }
}

}  // namespace

int run_command(const runtime::Environment& env, const RunOptions& options) {
  const LoadedDeck loaded = with_measured_microbatch_size(load_deck(options.deck));
  require_writable(options.json_path, "--json");
  const config::CheckpointConfig& checkpoint = loaded.config.checkpoint;
  if (checkpoint.every > 0) create_writable_directory(checkpoint.path, "checkpoint.path");
  if (!loaded.config.debug.dump_steps.empty())
    require_writable_directory(loaded.config.debug.dump_path, "debug.dump_path", "activation dumps");
  if (loaded.config.pipeline.activation_store == config::ActivationStore::hdf5) {
    runtime::require_activation_directory(runtime::activation_directory(loaded.config.pipeline.activation_path));
  }
  require_writable(options.profile_path, "--profile");
  const int steps = loaded.config.train.steps;
  runtime::TrainingSession session(loaded.config, loaded.deck.resolved_toml());
  Pipeline& pipeline = session.pipeline();
  print_setup(pipeline, "training");
  log_training_data(pipeline, loaded.config);
  const double characters_per_token =
      loaded.config.train.eval_every > 0 ? validation_characters_per_token(pipeline, loaded.config) : 1.0;
  runtime::ProfileRecorder profile(pipeline, options.profile_path);
  runtime::SessionHooks& hooks = session.hooks();
  hooks.step_finished = [&](int step, double start, const runtime::StepResult& result) {
    profile.add_step(step, start, result);
  };
  hooks.step_accounted = [&](const runtime::StepOutcome& done) {
    log::info("step {:>{}}/{}  loss {:.6f}  {:>9.4g} samples/s  ETA {}", done.step + 1,
              fmt::formatted_size("{}", steps), steps, done.loss, pipeline.spec().global_batch / done.seconds,
              duration(session.elapsed() / (done.step - session.first_step() + 1) * (steps - done.step - 1)));
  };
  hooks.validated = [&](int steps_done, double loss, int batches, double seconds) {
    log::info("validation after step {}: {} over {} batches ({:.2f} s)", steps_done,
              loss_text(pipeline, loss, characters_per_token), batches, seconds);
  };
  hooks.checkpointed = [](const std::string& file, int, double seconds) {
    log::info("checkpoint: {} ({:.3f} s)", file, seconds);
  };
  const auto finish = [&] {
    runtime::RunReport& report = session.report();
    report.finish(session.elapsed());
    report.print();
    if (options.json_path.empty()) return;
    report.write_json(options.json_path, {{"command", "run"},
                                          {"deck", options.deck.path},
                                          {"resolution", {{"deck_files_read", config::deck_files_read()}}}});
  };
  if (session.run() == runtime::SessionState::preempted) {
    log::info(
        "preempted: {} after step {}; {} holds the run, continue it with checkpoint.restart = \"latest\" "
        "(exit code {})",
        signal_name(session.preemption_signal()), session.steps_done(), session.last_checkpoint(),
        runtime::PreemptionSignals::exit_code);
    finish();
    return runtime::PreemptionSignals::exit_code;
  }
  finish();
  log_updates(pipeline, steps - session.first_step());
  if (const auto* store = pipeline.activation_store()) {
    const runtime::ActivationTraffic& io = store->traffic();
    const int done = std::max(1, steps - session.first_step());
    log::info(
        "activation store (rank {}): {:.1f} MiB written and read per step, {:.4f} s of I/O per step, peak "
        "resident stash {:.1f} KiB",
        pipeline.grid().world_rank(), static_cast<double>(io.bytes_written) / done / (1 << 20), io.seconds() / done,
        static_cast<double>(runtime::peak_stashed_bytes(pipeline)) / 1024);
  }
  profile.write(env.describe(), loaded.deck.source_text(), options.deck.overrides);
  return 0;
}

int infer_command(const runtime::Environment& env, const RunOptions& options) {
  const LoadedDeck loaded = load_deck(options.deck);
  require_writable(options.json_path, "--json");
  require_writable(options.profile_path, "--profile");
  const auto owned = runtime::build_pipeline(loaded.config, runtime::Mode::infer);
  Pipeline& pipeline = *owned;
  print_setup(pipeline, "inference");
  if (loaded.config.checkpoint.restart.empty()) {
    log::info("weights: initialised from model.seed = {} (set checkpoint.restart to evaluate a checkpoint)",
              loaded.config.model.seed);
  }
  restore(pipeline, loaded.config.checkpoint, nullptr);
  const int batches = inference_batches(pipeline, loaded.config);
  runtime::Evaluation total;
  runtime::ProfileRecorder profile(pipeline, options.profile_path);
  comm::barrier(comm::world());
  const double start = comm::wall_time();
  for (int step = 0; step < batches; ++step) {
    const double step_start = comm::wall_time();
    const runtime::StepResult result = runtime::abort_on_error([&] { return pipeline.run_step(step); });
    profile.add_step(step, step_start - start, result);
    total += runtime::global_evaluation(pipeline.grid(), pipeline.evaluation());
  }
  const double seconds = comm::wall_time() - start;
  const bool classification = pipeline.spec().model.loss == model::LossKind::cross_entropy;
  // Each batch's scaled losses add up to its mean loss; report the mean over batches.
  const double mean_loss = batches > 0 ? total.loss / batches : 0.0;
  // A language model predicts every position: its samples are tokens.
  const char* unit = pipeline.spec().model.token_sequences() ? "tokens" : "samples";
  log::info("inference: {} {} in {} batches, mean {}{}, {:.0f} {}/s", total.samples, unit, batches,
            loss_text(pipeline, mean_loss, validation_characters_per_token(pipeline, loaded.config)),
            classification
                ? fmt::format(", accuracy {:.2f}%", 100.0 * total.correct / std::max<std::int64_t>(1, total.samples))
                : "",
            total.samples / std::max(seconds, 1e-12), unit);
  if (!options.json_path.empty() && log::is_root()) {
    nlohmann::json json = {{"command", "infer"},     {"deck", options.deck.path},
                           {"batches", batches},     {"samples", total.samples},
                           {"mean_loss", mean_loss}, {"samples_per_second", total.samples / std::max(seconds, 1e-12)}};
    if (classification)
      json["accuracy"] = static_cast<double>(total.correct) / std::max<std::int64_t>(1, total.samples);
    write_output(options.json_path, "--json", [&](std::ostream& file) { file << json.dump(2) << '\n'; });
  }
  profile.write(env.describe(), loaded.deck.source_text(), options.deck.overrides);
  return 0;
}

}  // namespace kpipe::app
