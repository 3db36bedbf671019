#include "kpipe/runtime/step_update.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kpipe/comm/agreement.hpp"
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
      watchdog_(watchdog) {
  if (spec_.post_validation && needs_norm()) optimizer_.keep_previous();
}

template <class Scalar>
void StepUpdate<Scalar>::stop_on_failure(int step, std::exception_ptr loss_failure) const {
  comm::agree(grid_.world(), watchdog_, fmt::format("step {}", step), loss_failure);
}

template <class Scalar>
void StepUpdate<Scalar>::skip(int step) {
  ++skipped_;
  log::info(
      "step {}: a loss or the gradient norm is NaN or Inf; its update is skipped (train.on_nonfinite = \"skip\"): "
      "weights, optimizer state and learning rate stay as they were",
      step + 1);
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
  if (skips()) {
    failed = comm::max(grid_.world(), loss_failure ? 1.0 : 0.0) > 0;
  } else {
    stop_on_failure(step, loss_failure);
  }
  const double norm = needs_norm() ? gradients_.global_norm() : 0.0;
  if (skips() && (failed || !std::isfinite(norm))) return skip(step);
  optimizer_.step(model::clip_factor(norm, spec_.grad_clip));
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
