#pragma once
// kpipe as a library: a training session on every rank of the world communicator,
// built from a resolved configuration — read from a deck, or from keys set in
// code with no file (config::parse_deck on a string) — that steps, evaluates,
// checkpoints and restores. It is the loop `kpipe run` drives: the step
// cadence of validation (train.eval_every) and checkpoints (checkpoint.every),
// the run report, and the preemption signals of runtime.preempt_signals. The
// caller hears of each step, validation and checkpoint through hooks, and
// prints or records what it likes (the executable prints progress lines).
//
//   TrainingSession session(config);
//   while (session.step() == SessionState::running) {}
//   session.checkpoint();
//
// Every call is collective over the world: every rank makes it, in the same order.

#include <functional>
#include <memory>
#include <string>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/execution/step_ledger.hpp"
#include "kpipe/runtime/measurement/run_report.hpp"
#include "kpipe/runtime/measurement/throughput.hpp"
#include "kpipe/runtime/preemption.hpp"

namespace kpipe::runtime {

// What the caller hears of, on every rank, in step order. Each is optional.
struct SessionHooks {
  // A step this rank has finished, before its outcome is gathered from the
  // other ranks (`start`: seconds since the session's first step began).
  std::function<void(int step, double start, const StepResult& result)> step_finished;
  // A step whose outcome every rank has: its loss, time and bubble. With
  // train.post_validation outcomes arrive one step later than the step.
  std::function<void(const StepOutcome& outcome)> step_accounted;
  // A validation of the weights after `steps_done` steps: the mean loss over its batches.
  std::function<void(int steps_done, double loss, int batches, double seconds)> validated;
  // A checkpoint written after `steps_done` steps.
  std::function<void(const std::string& file, int steps_done, double seconds)> checkpointed;
};

// Where the session stands after a step.
enum class SessionState {
  running,    // steps remain before train.steps
  finished,   // train.steps are done, and every outcome accounted
  preempted,  // a preemption signal arrived: a checkpoint holds the run (last_checkpoint())
};

class TrainingSession {
 public:
  // Builds this rank's part of the pipeline (set-up agreed by every rank)
  // and restores config.checkpoint.restart when set. `resolved_deck` is the
  // deck text each checkpoint keeps for provenance (empty for a
  // configuration built in code).
  explicit TrainingSession(const config::RunConfig& config, std::string resolved_deck = {}, SessionHooks hooks = {});
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Runs step steps_done(), then a validation and a checkpoint where
  // train.eval_every and checkpoint.every fall due, and a checkpoint when a
  // preemption signal arrived. An error on one rank ends the job (one line,
  // its exit code), as in `kpipe run`.
  SessionState step();
  // Steps until train.steps are done or a preemption signal arrives.
  SessionState run();
  // The mean loss of the held-out data over its batches with the current
  // weights (train.eval_every > 0 builds the held-out evaluator).
  double evaluate();
  // Writes a checkpoint of steps_done() steps into checkpoint.path; returns its file.
  std::string checkpoint();
  // Loads a checkpoint file, or "latest" (the newest good one in
  // checkpoint.path), before the first step or once a run is over; returns
  // steps_done(), from which the session goes on.
  int restore(const std::string& file);

  int steps_done() const { return next_step_; }
  int first_step() const { return first_step_; }  // where this session began: 0, or a restart's steps
  int steps() const { return config_.train.steps; }
  // The preemption signal that ended the session, or 0.
  int preemption_signal() const { return signal_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  // Seconds since the session's first step began (0 before it).
  double elapsed() const;

  Pipeline<float>& pipeline() { return *pipeline_; }
  const Pipeline<float>& pipeline() const { return *pipeline_; }
  RunReport& report() { return *report_; }
  // The hooks, to attach or replace between calls (a hook may use the session).
  SessionHooks& hooks() { return hooks_; }
  const config::RunConfig& config() const { return config_; }

 private:
  void account(const StepOutcome& outcome);
  void account_all();
  bool due(int every, int steps_done) const { return every > 0 && (steps_done % every == 0); }

  config::RunConfig config_;
  std::string resolved_deck_;
  SessionHooks hooks_;
  // First: a signal during set-up or a restart's read is caught, and stops
  // the run after its first step, with a checkpoint.
  PreemptionSignals preemption_;
  // Before set-up: the utilisation's reference rate, measured while the
  // process is small (throughput.hpp).
  ReferenceRate reference_;
  std::unique_ptr<Pipeline<float>> pipeline_;
  std::unique_ptr<RunReport> report_;
  StepLedger ledger_;
  int first_step_ = 0;
  int next_step_ = 0;
  int signal_ = 0;       // the signal of the latest accounted step
  double start_ = -1.0;  // wall time of the first step's start
  std::string last_checkpoint_;
  int last_checkpoint_step_ = -1;
};

}  // namespace kpipe::runtime
