#include "kpipe/runtime/session.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <utility>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/environment.hpp"
#include "kpipe/runtime/execution/loss_head.hpp"
#include "kpipe/runtime/persistence/checkpoint.hpp"
#include "kpipe/runtime/training.hpp"

namespace kpipe::runtime {

namespace {

double mebibytes(const std::string& file) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(file, error);
  return error ? 0.0 : static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

TrainingSession::TrainingSession(const config::RunConfig& config, std::string resolved_deck, SessionHooks hooks)
    : config_(config),
      resolved_deck_(std::move(resolved_deck)),
      hooks_(std::move(hooks)),
      preemption_(config_.runtime.preempt_signals),
      reference_(reference_rate(config_)),
      pipeline_(build_pipeline(config_, Mode::train)),
      report_(std::make_unique<RunReport>(*pipeline_, config_, reference_)),
      // Post-validated steps follow each other without a barrier: their outcomes arrive one step late.
      ledger_(pipeline_->grid(), pipeline_->schedule(), !pipeline_->spec().optimizer.post_validation) {
  if (!config_.checkpoint.restart.empty()) restore(config_.checkpoint.restart);
}

TrainingSession::~TrainingSession() = default;

double TrainingSession::elapsed() const { return start_ < 0 ? 0.0 : comm::wall_time() - start_; }

int TrainingSession::restore(const std::string& file) {
  config::CheckpointConfig checkpoint = config_.checkpoint;
  checkpoint.restart = file;
  const int done = runtime::restore(*pipeline_, checkpoint, report_.get());
  if (done > steps()) {
    throw input_error(
        fmt::format("checkpoint.restart = \"{}\" has done {} steps, more than train.steps = {}; "
                    "train.steps counts from step 0, so set it above {}",
                    file, done, steps(), done));
  }
  first_step_ = next_step_ = done;
  return done;
}

SessionState TrainingSession::step() {
  if (next_step_ >= steps()) {
    account_all();
    return SessionState::finished;
  }
  if (start_ < 0) {
    comm::barrier(comm::world());
    start_ = comm::wall_time();
  }
  const int step = next_step_;
  const double step_start = comm::wall_time();
  StepResult result = abort_on_error([&] { return pipeline_->run_step(step); });
  const double seconds = comm::wall_time() - step_start;
  if (hooks_.step_finished) hooks_.step_finished(step, step_start - start_, result);
  ledger_.add(step, step_start, seconds, std::move(result), PreemptionSignals::received());
  next_step_ = step + 1;
  if (const auto done = abort_on_error([&] { return ledger_.next(); })) account(*done);

  const int eval_every = config_.train.eval_every;
  if (eval_every > 0 && (due(eval_every, next_step_) || next_step_ == steps())) evaluate();
  if (due(config_.checkpoint.every, next_step_)) checkpoint();
  if (signal_ != 0 && next_step_ < steps()) {
    if (last_checkpoint_step_ != next_step_) {
      create_writable_directory(config_.checkpoint.path, "checkpoint.path");
      checkpoint();
    }
    account_all();
    return SessionState::preempted;
  }
  if (next_step_ < steps()) return SessionState::running;
  account_all();
  abort_on_error([&] { pipeline_->settle(); });
  return SessionState::finished;
}

SessionState TrainingSession::run() {
  SessionState state = SessionState::running;
  while (state == SessionState::running) state = step();
  return state;
}

double TrainingSession::evaluate() {
  const double start = comm::wall_time();
  const Evaluation total = global_evaluation(pipeline_->grid(), abort_on_error([&] { return pipeline_->validate(); }));
  // Each batch's scaled losses add up to its mean loss.
  const double loss = total.loss / std::max(1, total.batches);
  report_->add_validation(next_step_, loss);
  if (hooks_.validated) hooks_.validated(next_step_, loss, total.batches, comm::wall_time() - start);
  return loss;
}

std::string TrainingSession::checkpoint() {
  const double start = comm::wall_time();
  const CheckpointRun run{resolved_deck_};
  const std::string file = abort_on_error([&] {
    pipeline_->settle();
    return save_checkpoint(*pipeline_, config_.checkpoint, run, next_step_);
  });
  const double seconds = comm::wall_time() - start;
  report_->add_checkpoint(file, next_step_, seconds, mebibytes(file));
  last_checkpoint_ = file;
  last_checkpoint_step_ = next_step_;
  if (hooks_.checkpointed) hooks_.checkpointed(file, next_step_, seconds);
  return file;
}

void TrainingSession::account(const StepOutcome& outcome) {
  report_->add_step(outcome, start_);
  if (outcome.signal != 0) signal_ = outcome.signal;
  if (hooks_.step_accounted) hooks_.step_accounted(outcome);
}

void TrainingSession::account_all() {
  for (const auto& outcome : abort_on_error([&] { return ledger_.flush(); })) account(outcome);
}

}  // namespace kpipe::runtime
