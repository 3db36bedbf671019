// The calibration `kpipe run` fits the simulator with leaves out the steps
// disturbed from outside the run (runtime/measurement/disturbed_steps.hpp): told to leave
// one out, it is the calibration of the run without that step, bitwise,
// where one action of it stretched by a stall shows in the calibration that
// keeps it.
#include <mpi.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/measurement/calibration_recorder.hpp"
#include "kpipe/schedule/calibration.hpp"

using namespace kpipe;

TEST_CASE("the calibration leaves out the steps it is told were disturbed", "[runtime][calibration]") {
  const int p = comm::size_of(comm::world());
  const config::RunConfig config = config::run_config(
      config::parse_deck(fmt::format("model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16]\nmodel.output_dim = 5\n"
                                     "train.global_batch = 32\ntrain.microbatch_size = 4\ntrain.steps = 6\n"
                                     "pipeline.stages = {}\npipeline.schedule = \"1f1b\"\n",
                                     p),
                         "test.toml"));
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  constexpr int steps = 6;
  constexpr std::size_t disturbed = 3;
  constexpr double stall = 0.05;  // seconds: 50 ms, far beyond any action of this model
  runtime::CalibrationRecorder with(pipeline), without(pipeline);
  double start = 0.0, disturbed_seconds = 0.0;
  for (int step = 0; step < steps; ++step) {
    runtime::StepResult result = pipeline.run_step(step);
    double seconds = result.timings.back().end;
    if (step == static_cast<int>(disturbed)) disturbed_seconds = seconds;
    if (step == static_cast<int>(disturbed) && comm::rank_of(comm::world()) == 0) {
      // Rank 0's first action stalls, and everything after it on the rank waits as long.
      for (std::size_t a = 0; a < result.timings.size(); ++a) {
        if (a > 0) result.timings[a].start += stall;
        result.timings[a].end += stall;
      }
      seconds += stall;
    }
    with.add_step(start, seconds, result);
    if (step != static_cast<int>(disturbed)) without.add_step(start, seconds, result);
    start += 1.0;  // each step on its own second of the shared clock
  }
  const auto left_out = with.finish({disturbed});
  const auto reference = without.finish();
  const auto kept = with.finish();
  const auto all = with.finish({1, 2, 3, 4, 5});  // collective, as each finish is
  if (comm::rank_of(comm::world()) != 0) {
    CHECK_FALSE(left_out.has_value());
    return;
  }
  REQUIRE(left_out.has_value());
  REQUIRE(reference.has_value());
  REQUIRE(kept.has_value());
  CHECK(schedule::calibration_json(*left_out) == schedule::calibration_json(*reference));
  CHECK(left_out->step_seconds == reference->step_seconds);
  // Kept, the step and its stall join the mean of the four other steady steps.
  CHECK(5 * kept->step_seconds == Approx(4 * reference->step_seconds + disturbed_seconds + stall).epsilon(1e-12));
  CHECK(schedule::calibration_json(*kept) != schedule::calibration_json(*reference));
  // Leaving out every steady step would leave nothing to describe: all count.
  REQUIRE(all.has_value());
  CHECK(schedule::calibration_json(*all) == schedule::calibration_json(*kept));
}
