#pragma once
// Loss scaling for compute.precision = fp16 (docs/model.md, Precision):
// float16 flushes gradients below 2^-24 to zero and overflows above 65504,
// so the loss gradient is multiplied by a scale that keeps the gradients the
// Linear layers round to float16 inside its range, and the update reads them
// divided by it (Micikevicius et al., "Mixed Precision Training", 2018). The
// dynamic scale follows Megatron-LM's DynamicGradScaler: a step whose loss
// or gradients overflow (NaN or Inf on any rank) is skipped; the
// `hysteresis`-th such step since the scale last grew, and every later one,
// halves the scale, down to `minimum`; `window` steps in a row without one
// double it. Every rank holds its own scaler and feeds it the agreed outcome, so all
// hold the same scale. Scales are powers of two: scaling is exact.

#include "kpipe/config/run_config.hpp"

namespace kpipe::model {

class LossScaler {
 public:
  explicit LossScaler(const config::LossScaleConfig& spec);

  // compute.precision = fp16. Without it the scale is 1 and never moves.
  bool enabled() const { return spec_.enabled; }
  // What this step's loss gradient is multiplied by.
  double scale() const { return scale_; }
  // Whether an overflow now leaves the scale where it is: it is static, or
  // dynamic and already at the minimum. Such an overflow follows
  // train.on_nonfinite (stop, or skip the step).
  bool cannot_lower() const { return spec_.fixed > 0 || scale_ <= spec_.minimum; }
  // Ends a step whose loss or gradients overflowed (its update is skipped), or not.
  void update(bool overflow);

  // What a checkpoint keeps, so a restarted run scales as the uninterrupted one.
  struct State {
    double scale = 1;
    int good_steps = 0;       // steps without an overflow since the scale last changed or overflowed
    int hysteresis_left = 0;  // overflows still tolerated before the scale halves
  };
  State state() const { return {scale_, good_steps_, hysteresis_left_}; }
  // Throws an input error for a state no scaler of this spec reaches (a scale
  // that is not a power of two in [minimum, 2^64], negative counts).
  void restore(const State& state);

 private:
  config::LossScaleConfig spec_;
  double scale_;
  int good_steps_ = 0;
  int hysteresis_left_;
};

}  // namespace kpipe::model
