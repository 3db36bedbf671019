// model::LossScaler against Megatron-LM's DynamicGradScaler
// (megatron/core/optimizer/grad_scaler.py), whose update rule is: on an
// overflow reset the growth count, count the hysteresis down and, once it
// reaches 0, multiply the scale by the backoff factor (0.5) but not below the
// minimum; otherwise count a good step, and at the growth interval reset the
// count and the hysteresis and multiply by the growth factor (2). The
// expected scales are that rule worked by hand.
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/model/training/loss_scaler.hpp"

using kpipe::config::LossScaleConfig;
using kpipe::model::LossScaler;

namespace {

LossScaleConfig dynamic(double initial, double minimum, int window, int hysteresis) {
  LossScaleConfig spec;
  spec.enabled = true;
  spec.initial = initial;
  spec.minimum = minimum;
  spec.window = window;
  spec.hysteresis = hysteresis;
  return spec;
}

}  // namespace

TEST_CASE("dynamic loss scaling follows Megatron-LM's DynamicGradScaler", "[model][fp16]") {
  LossScaler scaler(dynamic(8, 2, 3, 2));
  CHECK(scaler.scale() == 8);
  // Overflows (true) and good steps (false), and the scale after each.
  const std::vector<bool> overflows{true, true, true, true, false, false, false, true, false, true};
  const std::vector<double> expected{8, 4, 2, 2, 2, 2, 4, 4, 4, 2};
  std::vector<double> scales;
  for (const bool overflow : overflows) {
    scaler.update(overflow);
    scales.push_back(scaler.scale());
  }
  CHECK(scales == expected);
  CHECK(scaler.cannot_lower());  // at the minimum, 2
}

TEST_CASE("hysteresis 1 halves the scale at every overflow; the window doubles it", "[model][fp16]") {
  LossScaler scaler(dynamic(1024, 1, 2, 1));
  scaler.update(true);
  CHECK(scaler.scale() == 512);
  scaler.update(false);
  CHECK(scaler.scale() == 512);
  scaler.update(false);
  CHECK(scaler.scale() == 1024);
  CHECK(!scaler.cannot_lower());
}

TEST_CASE("a static loss scale never moves and cannot be lowered; without fp16 the scale is 1", "[model][fp16]") {
  LossScaleConfig spec = dynamic(65536, 1, 1, 1);
  spec.fixed = 128;
  LossScaler fixed(spec);
  for (const bool overflow : {true, false, false, true}) fixed.update(overflow);
  CHECK(fixed.scale() == 128);
  CHECK(fixed.cannot_lower());

  LossScaler off(LossScaleConfig{});
  off.update(false);
  CHECK(!off.enabled());
  CHECK(off.scale() == 1);
}

TEST_CASE("a loss scaler's state restores exactly, and an impossible one is an input error", "[model][fp16]") {
  LossScaler run(dynamic(1024, 4, 5, 3));
  for (const bool overflow : {true, false, false}) run.update(overflow);
  LossScaler restarted(dynamic(1024, 4, 5, 3));
  restarted.restore(run.state());
  for (const bool overflow : {false, false, false, true, true, true}) {
    run.update(overflow);
    restarted.update(overflow);
    CHECK(restarted.scale() == run.scale());
  }
  for (const LossScaler::State bad :
       {LossScaler::State{1000, 0, 1}, LossScaler::State{2, 0, 1}, LossScaler::State{1024, -1, 1}}) {
    const std::string message = kpipe::test::input_error_of([&] { restarted.restore(bad); });
    CHECK(message.find("the loss scaler state") != std::string::npos);
  }
}
