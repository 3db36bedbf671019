#pragma once
// Calibration: the simulator's costs measured in seconds from runs, so that
// `kpipe plan --costs` predicts a real step and `kpipe sweep` ranks
// microbatch sizes (docs/performance-log.md, "Sweep and calibrated plan").
//
// One run gives a Calibration: per model stage the mean F (LOSS folded in),
// B and W (a BW split in halves), a rank's own time per SEND and per RECV
// whose message had arrived, the link delay from a send to its message being
// ready, and the step overhead (what a step spends after the pipeline's last
// compute: gradient reduction, optimizer, loss agreement). Runs at several
// microbatch sizes b give a CostFit: the measured costs at the measured
// sizes, interpolated between them (costs are not linear in b: a GEMM library
// changes kernels with the row count), and fixed + per_sample · b by least
// squares beyond them.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/schedule/simulate.hpp"
#include "kpipe/schedule/timeline.hpp"

namespace kpipe::schedule {

struct Calibration {
  int p = 1, v = 1;
  int microbatch_size = 1;         // b of the run
  std::vector<StageCosts> stages;  // seconds, one per model stage (p·v)
  double send_seconds = 0.0;       // a rank's time in one SEND_*
  double receive_seconds = 0.0;    // a rank's time in one RECV_* whose message had been sent
  double link_latency = 0.0;       // seconds from the end of a send to its message being ready
  double link_bandwidth = 0.0;     // bytes per second; 0: the link costs latency only
  std::int64_t bytes_per_transfer = 0;
  double step_overhead = 0.0;      // seconds of a step after the pipeline's last compute
  double optimizer_seconds = 0.0;  // the slowest rank's REDUCE_GRADS and OPTIMIZER_STEP per step
  // The spread of the measured times around their means, as quantiles of
  // factors (mean 1): compute actions, link delays, receives. Empty: none.
  std::vector<double> compute_spread, transfer_spread, receive_spread;
  // What the run measured, for reports.
  double step_seconds = 0.0;  // mean steady step, wall time
  double makespan = 0.0;      // mean steady pipeline makespan (to the last compute)
  Bubble bubble;              // mean steady measured bubble
};

// The calibration of measured steps: `steps` holds one timeline per steady
// step of one pipeline (p ranks), times in seconds on a clock all ranks
// share (each step from its first rank's start); `step_seconds` is the mean
// wall time of those steps; `bytes_per_transfer` the size of one message.
Calibration measure_calibration(const std::vector<Timeline>& steps, int microbatch_size, double step_seconds,
                                std::int64_t bytes_per_transfer);

// The simulator's cost model of a calibration; max_in_flight as the deck's.
CostModel cost_model(const Calibration& calibration, int max_in_flight = 0);

// The calibrated prediction of one step of `schedule`: the mean of
// simulations with costs drawn from the measured spread (one simulation of
// the mean costs when there is none), counted as a run measures a step.
struct CalibratedStep {
  double makespan = 0.0;      // to the last compute action on any rank
  double step_seconds = 0.0;  // makespan + step overhead
  Bubble bubble;              // over that makespan
  Bubble span_bubble;         // within each rank's span
  Bubble post_validated;      // of steps without a barrier between them (train.post_validation)
  int simulations = 0;
};
CalibratedStep predict_step(const Schedule& schedule, const Calibration& calibration, int max_in_flight = 0);

// How many quantiles a spread keeps.
inline constexpr int spread_quantiles = 32;
// `spread_quantiles` factors: the means of equal shares of the sorted values
// over their mean, rescaled to mean 1; empty without values (or with a mean
// of 0).
std::vector<double> spread_factors(std::vector<double> values);

struct LinearCost {
  double fixed = 0.0;       // seconds
  double per_sample = 0.0;  // seconds per sample of the microbatch
  double at(double b) const { return fixed + per_sample * b; }
};

// Least squares of y = fixed + per_sample · x in relative residuals (weights
// 1/y²). With one distinct x the line goes through the origin when
// `proportional` (compute), else it is flat.
LinearCost fit_line(const std::vector<double>& x, const std::vector<double>& y, bool proportional);

struct CostFit {
  int p = 1, v = 1;
  std::vector<int> sizes;                         // b of the runs it was fitted to
  std::vector<std::array<LinearCost, 3>> stages;  // F, B, W of each model stage
  LinearCost send, receive;
  LinearCost link;  // seconds per message: latency + bytes / bandwidth, bytes ∝ b
  LinearCost step_overhead;
  double bytes_per_sample = 0.0;
  std::vector<double> compute_spread, transfer_spread, receive_spread;  // pooled over the runs
  std::vector<Calibration> runs;  // the measured runs, by increasing b; a file may hold none

  // The costs at microbatch size b: a measured run's own at its b, linear
  // between the two measured sizes around b, the lines outside them (costs a
  // line would make < 0 are clamped: compute to 1 ns, the others to 0).
  Calibration at(int b) const;
};

// Fits runs of one pipeline shape (same p and v); an input error otherwise.
// Compute costs of a single size scale with b; the per-message, link and
// step costs of a single size are taken as fixed.
CostFit fit_costs(const std::vector<Calibration>& runs);

// JSON objects, as `kpipe run --json` ("calibration") and `kpipe sweep
// --json` ("cost_fit") write them.
std::string calibration_json(const Calibration& calibration);
std::string cost_fit_json(const CostFit& fit);
// The costs in the text of a `run --json` (its one calibration, fitted) or a
// `sweep --json` file (its fit); an input error naming `source` and the
// missing or bad field otherwise.
CostFit read_costs_json(const std::string& text, const std::string& source);

}  // namespace kpipe::schedule
