#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe;
using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

RunPlan plan_of(const std::string& text) { return run_plan(config::run_config(config::parse_deck(text, "deck.toml"))); }

const std::string data = KPIPE_SCHEDULE_DATA_DIR;

}  // namespace

TEST_CASE("a deck gives the schedule spec and per-chunk costs", "[schedule][deck]") {
  const RunPlan plan = plan_of(
      "model.hidden = [32, 96, 64, 64, 64, 64, 64, 64]\ntrain.global_batch = 64\ntrain.microbatch_size = 8\n"
      "pipeline.stages = 4\npipeline.schedule = \"interleaved\"\npipeline.virtual_stages = 2\n"
      "sim.cost_forward = 2.0\nsim.cost_backward_input = 4.0\nsim.cost_backward_weight = 3.0\n"
      "sim.comm_latency = 0.5\nsim.comm_bandwidth = 1e6\nsim.max_in_flight = 9\n");
  CHECK(plan.spec.name == "interleaved");
  CHECK(plan.spec.p == 4);
  CHECK(plan.spec.v == 2);
  CHECK(plan.spec.m == 8);
  CHECK(plan.costs.forward == 1.0);  // a chunk is half of a pipeline stage
  CHECK(plan.costs.backward_input == 2.0);
  CHECK(plan.costs.backward_weight == 1.5);
  CHECK(plan.costs.comm_latency == 0.5);
  CHECK(plan.costs.comm_bandwidth == 1e6);
  CHECK(plan.costs.bytes_per_transfer == 0);  // charged per stage by runtime::charged_plan, which knows the model
  CHECK(plan.costs.max_in_flight == 9);
  CHECK(plan.schedule_file.empty());
}

TEST_CASE("make_schedule generates, lowers and validates, or reads the schedule file", "[schedule][deck]") {
  const std::string deck = "train.global_batch = 64\ntrain.microbatch_size = 16\npipeline.stages = 2\n";
  const Schedule generated = make_schedule(plan_of(deck));
  CHECK(generated.ranks == lowered("1f1b", 2, 4).ranks);
  const Schedule from_file =
      make_schedule(plan_of(deck + "pipeline.schedule_file = \"" + data + "/schedules/1f1b-p2-m4.txt\"\n"));
  CHECK(from_file.ranks == generated.ranks);
  CHECK(error_of([&] {
          make_schedule(
              plan_of("train.global_batch = 32\ntrain.microbatch_size = 16\npipeline.stages = 2\n"
                      "pipeline.schedule_file = \"" +
                      data + "/schedules/1f1b-p2-m4.txt\"\n"));
        }).find("1f1b-p2-m4.txt: the schedule is for m = 4, but the deck has m = 2") != std::string::npos);
}
