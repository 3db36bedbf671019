#pragma once
// The progress record and final summary of `kpipe run`: loss and throughput
// per step, measured against simulated bubble, measured against predicted
// peak activations per rank, bytes moved; printed by rank 0 and written as JSON.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kpipe/model/traffic.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/execution/step_ledger.hpp"
#include "kpipe/runtime/measurement/calibration_recorder.hpp"
#include "kpipe/runtime/measurement/disturbed_steps.hpp"
#include "kpipe/runtime/measurement/throughput.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::runtime {

class RunReport {
 public:
  // `config` is the run's: its predicted communication volume is printed next to the measured one.
  // `reference`: the rate the utilisation is a share of (reference_rate).
  RunReport(const runtime::Pipeline<float>& pipeline, const config::RunConfig& config, ReferenceRate reference);

  // Every rank, for every step, in step order: its outcome as the
  // StepLedger gathered it; `run_start` is when the run's steps began, on
  // the clock all ranks share.
  void add_step(const StepOutcome& step, double run_start);
  // Collective over the world: gathers the per-rank statistics and the
  // calibration (per-stage and per-message costs in seconds).
  void finish(double seconds);

  // A checkpoint written after `step` completed steps, and how long it took.
  // train.eval_every: the validation loss after `step` steps.
  void add_validation(std::int64_t step, double loss);
  void add_checkpoint(const std::string& file, std::int64_t step, double seconds, double mib);
  // The run continued from this checkpoint.
  void restarted_from(const std::string& file, std::int64_t step, double seconds);

  void print() const;
  // `command`: what the command adds (its name, the deck, what it read),
  // merged into the summary (RFC 7386).
  void write_json(const std::string& path, const nlohmann::json& command) const;

 private:
  struct LinkBytes {
    double measured = 0.0, predicted = 0.0;
  };
  struct RankRow {
    int stage = 0, tensor_rank = 0, replica = 0, peak_stashed = 0, predicted_peak_stashed = -1;  // -1: no prediction
    double peak_stashed_mib = 0.0, mib_sent = 0.0;
    double estimated_mib = 0.0, peak_resident_mib = 0.0;  // the set-up estimate against the measured peak
    // The data-parallel gradient sum per step: seconds in flight, and how many
    // of them came after the last compute action of any rank (not hidden).
    double sum_in_flight = 0.0, sum_exposed = 0.0;
    // Bytes sent per step, by link: measured (the run's counters over its steps) against predicted.
    LinkBytes pipeline_bytes, tensor_bytes, data_bytes, tied_bytes;
  };
  // Of every rank's gradient sums, the fraction hidden behind compute.
  double hidden_fraction() const;
  // fp16: {"history": each step's loss scale, "skipped_steps": [...]}; null otherwise.
  nlohmann::json loss_scale_json() const;
  nlohmann::json json() const;
  // Model FLOP/s over the mean steady step.
  Throughput measured_throughput() const;

  const runtime::Pipeline<float>& pipeline_;
  ReferenceRate reference_;  // of the utilisation, set at start-up
  // The simulator's prediction; none for a schedule run unchecked
  // (pipeline.validate_schedule = false), which the simulator may reject.
  std::optional<schedule::SimulationResult> predicted_;
  std::vector<model::StepTraffic> predicted_traffic_;  // per pipeline rank
  CalibrationRecorder calibration_;
  std::optional<schedule::Calibration> calibrated_;       // rank 0, after finish()
  std::optional<schedule::CalibratedStep> recalibrated_;  // the step simulated with those costs
  std::vector<double> losses_, step_seconds_;
  std::vector<int> step_numbers_;    // as the log counts them, from 1
  DisturbedSteps disturbed_;         // of step_seconds_, from finish()
  std::vector<double> loss_scales_;  // each step's fp16 loss scale
  std::vector<runtime::MeasuredBubble> measured_bubbles_;
  // The steady steps' mean of `which` (the bubble over the makespan, or
  // within spans), leaving out the steps at `left_out` (disturbed_steps).
  schedule::Bubble steady_bubble(schedule::Bubble runtime::MeasuredBubble::*which,
                                 const std::vector<std::size_t>& left_out = {}) const;
  std::vector<double> sum_in_flight_, sum_exposed_;  // per step, this rank (d > 1)
  int peak_stashed_ = 0;
  double seconds_ = 0.0;
  std::vector<RankRow> rows_;  // rank 0 only, after finish()
  nlohmann::json checkpoints_ = nlohmann::json::array();
  nlohmann::json validation_ = nlohmann::json::array();
  nlohmann::json restart_;  // null unless restarted
};

}  // namespace kpipe::runtime
