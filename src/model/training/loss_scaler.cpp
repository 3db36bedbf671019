#include "kpipe/model/training/loss_scaler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kpipe/core/error.hpp"

namespace kpipe::model {

LossScaler::LossScaler(const config::LossScaleConfig& spec)
    : spec_(spec),
      scale_(!spec.enabled    ? 1.0
             : spec.fixed > 0 ? spec.fixed
                              : spec.initial),
      hysteresis_left_(spec.hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!spec_.enabled || spec_.fixed > 0) return;
  if (overflow) {
    good_steps_ = 0;
    hysteresis_left_ = std::max(hysteresis_left_ - 1, 0);
    if (hysteresis_left_ == 0) scale_ = std::max(scale_ / 2, spec_.minimum);
    return;
  }
  if (++good_steps_ < spec_.window) return;
  good_steps_ = 0;
  hysteresis_left_ = spec_.hysteresis;
  scale_ *= 2;
}

void LossScaler::restore(const State& state) {
  int exponent = 0;
  const bool power_of_two = std::isfinite(state.scale) && std::frexp(state.scale, &exponent) == 0.5;
  const double lowest = spec_.fixed > 0 ? spec_.fixed : spec_.minimum;
  if (!power_of_two || state.scale < lowest || state.scale > 0x1p64 || state.good_steps < 0 ||
      state.hysteresis_left < 0) {
    throw input_error(fmt::format(
        "the loss scaler state (scale {}, {} good steps, hysteresis {}) is not one an fp16 run with scales from {} "
        "reaches; the file was altered, restart from another checkpoint",
        state.scale, state.good_steps, state.hysteresis_left, lowest));
  }
  if (spec_.fixed > 0) return;  // a static scale stays the deck's
  scale_ = state.scale;
  good_steps_ = std::min(state.good_steps, spec_.window - 1);
  hysteresis_left_ = std::min(state.hysteresis_left, spec_.hysteresis);
}

}  // namespace kpipe::model
