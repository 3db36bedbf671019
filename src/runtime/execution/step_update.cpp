#include "kpipe/runtime/execution/step_update.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"

namespace kpipe::runtime {

template <class Scalar>
StepUpdate<Scalar>::StepUpdate(const model::OptimizerSpec& spec, const comm::ProcessGrid& grid,
                               GradientSync<Scalar>& gradients, model::Optimizer<Scalar>& optimizer,
                               std::function<void()> weights_changed, const comm::Watchdog& watchdog)
    : spec_(spec),
      grid_(grid),
      gradients_(gradients),
      optimizer_(optimizer),
      weights_changed_(std::move(weights_changed)),
      watchdog_(watchdog),
      scaler_(spec.loss_scale) {
  if (spec_.post_validation && scaler_.enabled()) {
    throw input_error(
        "post-validated optimizer steps cannot yet scale an fp16 loss: a step would run ahead with a "
        "loss scale its predecessor's overflow check may change");
  }
  if (spec_.post_validation && needs_norm()) optimizer_.keep_previous();
}

template <class Scalar>
void StepUpdate<Scalar>::stop_on_failure(int step, std::exception_ptr loss_failure) const {
  comm::agree(grid_.world(), watchdog_, fmt::format("step {}", step), loss_failure);
}

template <class Scalar>
void StepUpdate<Scalar>::skip(int step) {
  skipped_steps_.push_back(step);
  log::info(
      "step {}: a loss or the gradient norm is NaN or Inf; its update is skipped (train.on_nonfinite = \"skip\"): "
      "weights, optimizer state and learning rate stay as they were",
      step + 1);
}

template <class Scalar>
void StepUpdate<Scalar>::overflowed(int step) {
  const double scale = scaler_.scale();
  if (scaler_.cannot_lower() && !skips()) {
    // Every rank knows the overflow (the flag and the norm are global): all fail alike.
    const auto stop = std::make_exception_ptr(runtime_error(fmt::format(
        "step {}: a loss or gradient overflows float16 (NaN or Inf) at loss scale {}, which cannot be lowered "
        "further; the run stops before the step's update. Lower train.lr, set train.on_nonfinite = \"skip\" or use "
        "compute.precision = \"bf16\"",
        step + 1, scale)));
    comm::agree(grid_.world(), watchdog_, fmt::format("step {}", step), stop);
  }
  scaler_.update(true);
  skipped_steps_.push_back(step);
  log::info(
      "step {}: a loss or gradient overflowed float16 at loss scale {}; the update is skipped, the scale is now {}",
      step + 1, scale, scaler_.scale());
}

template <class Scalar>
void StepUpdate<Scalar>::finish(int step, std::exception_ptr loss_failure) {
  if (spec_.post_validation) {
    settle();  // a no-op unless the caller skipped it
    Check check;
    check.step = step;
    check.loss_failure = loss_failure;
    check.guess = last_factor_;
    if (needs_norm()) {
      check.norms =
          std::make_unique<comm::PendingGather>(grid_.pipeline(), gradients_.squared_norms(), gradients_.norm_counts());
    }
    check.any_failed = std::make_unique<comm::PendingMax>(grid_.world(), loss_failure ? 1.0 : 0.0);
    optimizer_.step(check.guess);
    weights_changed_();
    in_flight_.emplace(std::move(check));
    return;
  }
  bool failed = false;
  if (skips() || scaler_.enabled()) {
    failed = comm::max(grid_.world(), loss_failure ? 1.0 : 0.0) > 0;
  } else {
    stop_on_failure(step, loss_failure);
  }
  const double norm = needs_norm() ? gradients_.global_norm() : 0.0;
  const bool overflow = failed || !std::isfinite(norm);
  if (scaler_.enabled() && overflow) return overflowed(step);
  if (skips() && overflow) return skip(step);
  optimizer_.step(model::gradient_factor(norm, spec_.grad_clip, scaler_.scale()));
  scaler_.update(false);
  weights_changed_();
}

template <class Scalar>
bool StepUpdate<Scalar>::settle() {
  if (!in_flight_) return true;
  const Check check = std::move(*in_flight_);
  in_flight_.reset();
  const bool failed = check.any_failed->result() > 0;
  const double norm = check.norms ? gradients_.global_norm(check.norms->result()) : 0.0;
  const auto undo = [&] {
    optimizer_.roll_back();
    weights_changed_();
  };
  if (failed && !skips()) {
    if (needs_norm()) undo();
    stop_on_failure(check.step, check.loss_failure);
  }
  if (skips() && (failed || !std::isfinite(norm))) {
    undo();
    skip(check.step);
    guesses_hold_ = false;
    return false;
  }
  const double factor = model::clip_factor(norm, spec_.grad_clip);
  last_factor_ = factor;
  guesses_hold_ = factor == check.guess;
  if (guesses_hold_) return true;
  undo();
  optimizer_.step(factor);
  weights_changed_();
  ++redone_;
  return false;
}

template class StepUpdate<float>;
template class StepUpdate<double>;

}  // namespace kpipe::runtime
