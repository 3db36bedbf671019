#pragma once
// The optimizer update that ends a training step, and the checks it waits
// for: a NaN or Inf in any rank's loss or in the global gradient norm
// (train.on_nonfinite: the run stops before the update, or the update is
// skipped on every rank) and the global clip factor (train.grad_clip). In
// fp16 runs such a NaN or Inf is an overflow of the loss scale: the update
// is skipped and the scale lowered (model::LossScaler), and only an overflow
// the scale can no longer answer follows train.on_nonfinite.
//
// Synchronous, every rank agrees first and updates after: no rank starts its
// update before the slowest has finished its last backward. Post-validated
// (train.post_validation; Zero Bubble PP, arXiv 2401.10241 §4), each rank
// updates as soon as its own gradients are final, guessing the previous
// step's clip factor, while the check runs as nonblocking collectives;
// settle() completes it, and where the guess was wrong (the factor changed,
// or the step must be skipped or stop the run) it rolls the update back and
// redoes it with the right factor (or leaves it undone). The weights are
// bitwise the synchronous path's either way: the update reads each gradient
// times the factor and leaves the gradient as it was, and the roll-back
// restores a copy, not an inverse.

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kpipe/comm/pending.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/watchdog.hpp"
#include "kpipe/model/training/loss_scaler.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "kpipe/runtime/execution/gradient_sync.hpp"

namespace kpipe::runtime {

template <class Scalar>
class StepUpdate {
 public:
  // `weights_changed` tells the stages that the weights moved (packed copies).
  // Post-validation and loss scaling exclude each other (an input error).
  StepUpdate(const model::OptimizerSpec& spec, const comm::ProcessGrid& grid, GradientSync<Scalar>& gradients,
             model::Optimizer<Scalar>& optimizer, std::function<void()> weights_changed,
             const comm::Watchdog& watchdog);

  // Ends training step `step` (from 0) once this rank's gradients are final
  // and summed; `loss_failure` is this rank's first non-finite loss of the
  // step, or null. Synchronous: throws comm::AgreedError on every rank when
  // the run stops (train.on_nonfinite = "stop").
  void finish(int step, std::exception_ptr loss_failure);
  // Completes a post-validated update still in flight (nothing otherwise):
  // call before anything reads the weights or runs backward work of the next
  // step. Returns false when it rolled the update back (redone or skipped):
  // whatever ran on the weights since finish() ran on the wrong ones. Throws
  // as finish() does (after rolling the update back where a copy was kept).
  bool settle();

  // Whether the next step may run ahead of the last update's check: while
  // the guesses hold. After a wrong one (a clip factor that changes from step
  // to step) the next step settles first, so that heads run twice only on the
  // first wrong guess after right ones.
  bool guesses_hold() const { return guesses_hold_; }
  // Steps whose update was skipped (train.on_nonfinite = "skip", fp16
  // overflows), and which (from 0).
  int skipped() const { return static_cast<int>(skipped_steps_.size()); }
  const std::vector<int>& skipped_steps() const { return skipped_steps_; }
  // What the next step's loss gradients are multiplied by (1 but in fp16).
  double loss_scale() const { return scaler_.scale(); }
  model::LossScaler& loss_scaler() { return scaler_; }
  const model::LossScaler& loss_scaler() const { return scaler_; }
  // Post-validated updates rolled back and redone with the global clip factor.
  int redone() const { return redone_; }

 private:
  // The check of a post-validated step, in flight.
  struct Check {
    int step = 0;
    std::exception_ptr loss_failure;
    double guess = 1.0;                            // the clip factor the update used
    std::unique_ptr<comm::PendingGather> norms;    // every rank's squared norms, when a norm is needed
    std::unique_ptr<comm::PendingMax> any_failed;  // 1 when some rank's loss was non-finite
  };

  bool skips() const { return spec_.on_nonfinite == config::NonFinite::skip; }
  // Also whether a check can change an update the run goes on from: only
  // then is the copy kept that a roll-back restores. A run that stops on a
  // NaN writes nothing after it, so it needs none.
  bool needs_norm() const { return model::needs_gradient_norm(spec_); }
  // The run stops (comm::agree throws everywhere) when the stop policy meets a failure.
  void stop_on_failure(int step, std::exception_ptr loss_failure) const;
  void skip(int step);
  // An fp16 step whose loss or gradients overflowed: skipped, the scale
  // lowered; where it cannot be lowered, train.on_nonfinite decides.
  void overflowed(int step);

  const model::OptimizerSpec& spec_;
  const comm::ProcessGrid& grid_;
  GradientSync<Scalar>& gradients_;
  model::Optimizer<Scalar>& optimizer_;
  std::function<void()> weights_changed_;
  const comm::Watchdog& watchdog_;
  std::optional<Check> in_flight_;
  double last_factor_ = 1.0;  // the last applied update's clip factor: the next guess
  bool guesses_hold_ = true;
  model::LossScaler scaler_;
  std::vector<int> skipped_steps_;
  int redone_ = 0;
};

}  // namespace kpipe::runtime
