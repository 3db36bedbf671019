// Calibration: costs measured from timelines and fitted over microbatch
// sizes must give back the model that made the timings. The timings come
// from the simulator run with known costs, or from a known linear model, so
// every check compares against exact truth.

#include <cmath>
#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/timeline.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;
using Catch::Matchers::Contains;

namespace {

constexpr double tolerance = 1e-9;

// A cost model whose stages, messages and link all differ, so a mix-up shows.
CostModel known_costs(int stages, bool split_backward) {
  CostModel costs;
  for (int s = 0; s < stages; ++s) {
    const double b = 0.8 + 0.1 * s;
    costs.stages.push_back({1.0 + 0.25 * s, b, split_backward ? 0.5 + 0.05 * s : b});
  }
  costs.send_time = 0.01;
  costs.receive_time = 0.02;
  costs.comm_latency = 0.05;
  costs.bytes_per_transfer = 4096;
  return costs;
}

}  // namespace

TEST_CASE("simulate: a send costs its rank send_time, a receive receive_time after the message arrives",
          "[schedule][simulate][calibration]") {
  // GPipe p = 2, m = 1 is one chain: F, send, link, receive, F, BW, send, link, receive, BW.
  CostModel costs = unit_forward_and_backward();
  costs.send_time = 0.125;
  costs.receive_time = 0.25;
  costs.comm_latency = 0.5;
  const SimulationResult r = simulate(lowered("gpipe", 2, 1), costs);
  const double F = costs.forward, BW = costs.backward_input + costs.backward_weight;
  CHECK(r.makespan == F + 2 * (costs.send_time + costs.comm_latency + costs.receive_time) + F + BW + BW);
  CHECK(r.last_compute_end == r.makespan);
  CHECK(r.total_busy == 2 * (F + BW));
}

TEST_CASE("measure_calibration gives back the costs a simulated timeline was made with", "[schedule][calibration]") {
  for (const char* name : {"1f1b", "zb-h1", "gpipe"}) {
    for (int p : {2, 3, 4}) {
      const bool split = std::string(name) == "zb-h1";
      const Schedule s = lowered(name, p, 8);
      const CostModel costs = known_costs(p, split);
      const Timeline timeline = simulated_timeline(s, simulate(s, costs));
      const double step_seconds = simulate(s, costs).last_compute_end + 0.75;
      const Calibration c = measure_calibration({timeline, timeline}, 16, step_seconds, costs.bytes_per_transfer);
      CAPTURE(name, p);
      REQUIRE(c.stages.size() == static_cast<std::size_t>(p));
      for (int st = 0; st < p; ++st) {
        CHECK(c.stages[st].forward == Approx(costs.stages[st].forward).epsilon(tolerance));
        CHECK(c.stages[st].backward_input == Approx(costs.stages[st].backward_input).epsilon(tolerance));
        CHECK(c.stages[st].backward_weight == Approx(costs.stages[st].backward_weight).epsilon(tolerance));
      }
      CHECK(c.send_seconds == Approx(costs.send_time).epsilon(tolerance));
      CHECK(c.receive_seconds == Approx(costs.receive_time).epsilon(tolerance));
      CHECK(c.link_latency == Approx(costs.comm_latency).epsilon(tolerance));
      CHECK(c.step_overhead == Approx(0.75).epsilon(tolerance));
      // The calibrated simulation predicts the step it was measured from, bubble included.
      const CalibratedStep predicted = predict_step(s, c);
      CHECK(predicted.step_seconds == Approx(step_seconds).epsilon(tolerance));
      CHECK(predicted.bubble.idle_over_useful == Approx(c.bubble.idle_over_useful).epsilon(tolerance));
      CHECK(predicted.makespan == Approx(c.makespan).epsilon(tolerance));
    }
  }
}

TEST_CASE("fit_line: least squares recovers a line, one size gives a proportional or flat one",
          "[schedule][calibration]") {
  const LinearCost line = fit_line({1, 2, 4, 8, 16}, {3.5, 5.5, 9.5, 17.5, 33.5}, true);
  CHECK(line.fixed == Approx(1.5).epsilon(tolerance));
  CHECK(line.per_sample == Approx(2.0).epsilon(tolerance));
  // Equal relative noise either side of the line: the weighted fit stays near it.
  const LinearCost noisy = fit_line({2, 2, 6, 6}, {5.0 * 1.01, 5.0 / 1.01, 13.0 / 1.01, 13.0 * 1.01}, true);
  CHECK(noisy.fixed == Approx(1.0).epsilon(0.01));
  CHECK(noisy.per_sample == Approx(2.0).epsilon(0.01));
  // Relative residuals: a line through points of very different size fits the small one as well as the large.
  const LinearCost wide = fit_line({1, 100, 1000}, {1.1, 100.0, 1000.0}, true);
  CHECK(wide.at(1) == Approx(1.1).epsilon(0.2));
  const LinearCost proportional = fit_line({8, 8}, {4.0, 4.0}, true);
  CHECK(proportional.fixed == 0.0);
  CHECK(proportional.per_sample == Approx(0.5));
  const LinearCost flat = fit_line({8}, {4.0}, false);
  CHECK(flat.fixed == 4.0);
  CHECK(flat.per_sample == 0.0);
}

TEST_CASE("fit_costs recovers a known linear cost model from runs at several b", "[schedule][calibration]") {
  // Truth: every cost = fixed + per_sample * b.
  const auto truth = [](int b) {
    Calibration c;
    c.p = 2;
    c.v = 1;
    c.microbatch_size = b;
    c.stages = {{2e-4 + 3e-5 * b, 1e-4 + 4e-5 * b, 5e-5 + 2e-5 * b},
                {3e-4 + 3.5e-5 * b, 2e-4 + 5e-5 * b, 6e-5 + 1e-5 * b}};
    c.send_seconds = 4e-6;
    c.receive_seconds = 6e-6;
    c.bytes_per_transfer = std::int64_t{1024} * b;
    c.link_latency = 1e-5;
    c.link_bandwidth = 2e9;  // bytes per second: the link takes 1e-5 + 512e-9 b seconds
    c.step_overhead = 1e-3 + 1e-7 * b;
    return c;
  };
  std::vector<Calibration> runs;
  for (int b : {4, 8, 16, 32, 64}) runs.push_back(truth(b));
  const CostFit fit = fit_costs(runs);
  CHECK(fit.sizes == std::vector<int>{4, 8, 16, 32, 64});
  for (int b : {4, 12, 24, 100}) {  // measured and unmeasured sizes
    const Calibration want = truth(b), got = fit.at(b);
    CAPTURE(b);
    for (std::size_t s = 0; s < 2; ++s) {
      CHECK(got.stages[s].forward == Approx(want.stages[s].forward).epsilon(tolerance));
      CHECK(got.stages[s].backward_input == Approx(want.stages[s].backward_input).epsilon(tolerance));
      CHECK(got.stages[s].backward_weight == Approx(want.stages[s].backward_weight).epsilon(tolerance));
    }
    CHECK(got.send_seconds == Approx(want.send_seconds).epsilon(tolerance));
    CHECK(got.receive_seconds == Approx(want.receive_seconds).epsilon(tolerance));
    CHECK(got.bytes_per_transfer == want.bytes_per_transfer);
    CHECK(got.link_latency == Approx(want.link_latency).epsilon(tolerance));
    CHECK(got.link_bandwidth == Approx(want.link_bandwidth).epsilon(tolerance));
    CHECK(got.step_overhead == Approx(want.step_overhead).epsilon(tolerance));
  }
  runs.back().p = 4;
  CHECK_THROWS_WITH(fit_costs(runs), Contains("cannot fit costs of different pipelines"));
}

TEST_CASE("fit_costs keeps the measured runs: their own costs at their b, linear between, the line beyond",
          "[schedule][calibration]") {
  // Costs that jump between b = 4 and b = 8, as a GEMM library's change of kernel makes them.
  const auto run = [](int b, double forward, double overhead) {
    Calibration c;
    c.p = 1;
    c.microbatch_size = b;
    c.stages = {{forward, 2 * forward, forward}};
    c.step_overhead = overhead;
    c.link_latency = 1e-6;
    c.link_bandwidth = 1e9;
    c.bytes_per_transfer = 100 * b;
    return c;
  };
  const CostFit fit = fit_costs({run(16, 9e-4, 3e-4), run(4, 1e-4, 1e-4), run(8, 5e-4, 2e-4)});
  REQUIRE(fit.runs.size() == 3);
  CHECK(fit.runs.front().microbatch_size == 4);
  CHECK(fit.at(8).stages[0].forward == 5e-4);  // the run's own, not the line's
  CHECK(fit.at(8).step_overhead == 2e-4);
  CHECK(fit.at(6).stages[0].forward == Approx(3e-4));  // halfway between b = 4 and 8
  CHECK(fit.at(6).stages[0].backward_input == Approx(6e-4));
  CHECK(fit.at(12).step_overhead == Approx(2.5e-4));
  CHECK(fit.at(12).link_bandwidth == Approx(1e9));
  CHECK(fit.at(12).bytes_per_transfer == 1200);
  for (int b : {2, 32}) {  // outside the measured sizes: the fitted lines
    CAPTURE(b);
    CHECK(fit.at(b).stages[0].forward == Approx(std::max(1e-9, fit.stages[0][0].at(b))));
    CHECK(fit.at(b).step_overhead == Approx(std::max(0.0, fit.step_overhead.at(b))));
  }
  // The runs travel with the fit's JSON (a sweep's file), so plan --costs interpolates the same way.
  const CostFit back =
      read_costs_json(nlohmann::json{{"cost_fit", nlohmann::json::parse(cost_fit_json(fit))}}.dump(), "sweep.json");
  REQUIRE(back.runs.size() == 3);
  CHECK(back.at(6).stages[0].forward == Approx(3e-4));
  CHECK(back.at(8).step_overhead == 2e-4);
  nlohmann::json reordered = nlohmann::json::parse(cost_fit_json(fit));
  std::swap(reordered["runs"][0], reordered["runs"][2]);
  CHECK_THROWS_WITH(read_costs_json(nlohmann::json{{"cost_fit", reordered}}.dump(), "s.json"),
                    Contains("s.json: 'runs' in 'cost_fit' is missing or not ordered by microbatch_size"));
}

TEST_CASE("cost JSON: a sweep's fit and a run's calibration read back; bad files name the field",
          "[schedule][calibration]") {
  Calibration c;
  c.p = 2;
  c.microbatch_size = 16;
  c.stages = {{1e-3, 2e-3, 3e-3}, {1.5e-3, 2.5e-3, 3.5e-3}};
  c.send_seconds = 1e-6;
  c.receive_seconds = 2e-6;
  c.link_latency = 3e-6;
  c.bytes_per_transfer = 16384;
  c.step_overhead = 4e-4;
  const std::string run = nlohmann::json{{"calibration", nlohmann::json::parse(calibration_json(c))}}.dump();
  const CostFit from_run = read_costs_json(run, "run.json");
  CHECK(from_run.at(16).stages[1].backward_weight == Approx(3.5e-3));
  CHECK(from_run.at(32).stages[1].backward_weight == Approx(7e-3));  // one run: compute scales with b
  CHECK(from_run.at(32).step_overhead == Approx(4e-4));              // ... the step overhead does not
  const std::string sweep = nlohmann::json{{"cost_fit", nlohmann::json::parse(cost_fit_json(from_run))}}.dump();
  const CostFit from_sweep = read_costs_json(sweep, "sweep.json");
  CHECK(from_sweep.at(8).stages[0].forward == Approx(from_run.at(8).stages[0].forward));
  CHECK(from_sweep.at(8).receive_seconds == Approx(2e-6));

  CHECK_THROWS_WITH(read_costs_json("{\"schedule\": \"1f1b\"}", "old.json"),
                    Contains("old.json: holds neither 'calibration' nor 'cost_fit'"));
  CHECK_THROWS_WITH(read_costs_json("not json", "x.json"), Contains("x.json: not a JSON file"));
  nlohmann::json partial = nlohmann::json::parse(run);
  partial["calibration"].erase("receive_seconds");
  CHECK_THROWS_WITH(read_costs_json(partial.dump(), "p.json"),
                    Contains("p.json: 'receive_seconds' in 'calibration' is missing or not a number"));
}

TEST_CASE("a measured spread: one rank keeps its mean time, waits between ranks add up slow draws",
          "[schedule][calibration]") {
  Calibration c;
  c.p = 1;
  c.microbatch_size = 8;
  c.stages = {{1.0, 1.0, 1.0}};
  c.compute_spread = {0.5, 1.5};
  // One rank never waits: its step is the sum of its draws, whose mean is the sum of the means.
  const CalibratedStep alone = predict_step(lowered("1f1b", 1, 64), c);
  CHECK(alone.makespan == Approx(64 * 3.0).epsilon(0.02));
  // Two ranks wait for each other: the mean step is longer than the step of the mean costs (Jensen).
  c.p = 2;
  c.stages = {{1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}};
  const CalibratedStep spread = predict_step(lowered("1f1b", 2, 16), c);
  c.compute_spread.clear();
  const CalibratedStep exact = predict_step(lowered("1f1b", 2, 16), c);
  CHECK(exact.simulations == 1);
  CHECK(exact.makespan == (16 + 1) * 3.0);
  CHECK(spread.makespan > exact.makespan * 1.05);
  CHECK(spread.bubble.idle_over_useful > exact.bubble.idle_over_useful);
}

TEST_CASE("spread_factors keep the mean of sparse samples and stay finite", "[schedule][calibration]") {
  // Mostly zero waits and one long one (a short run on a fast machine): every
  // single quantile is 0, the shares' means are not.
  std::vector<double> waits(100, 0.0);
  waits[37] = 5e-4;
  const std::vector<double> f = spread_factors(waits);
  REQUIRE(f.size() == spread_quantiles);
  double sum = 0.0;
  for (double x : f) {
    CHECK(std::isfinite(x));
    CHECK(x >= 0.0);
    sum += x;
  }
  CHECK(sum / f.size() == Approx(1.0));
  CHECK(f.back() > 1.0);
  // Fewer values than factors: each share is its nearest value, mean still 1.
  const std::vector<double> few = spread_factors({1.0, 3.0});
  CHECK(few.front() == Approx(0.5));
  CHECK(few.back() == Approx(1.5));
  CHECK(spread_factors({}).empty());
  CHECK(spread_factors({0.0, 0.0}).empty());
}
