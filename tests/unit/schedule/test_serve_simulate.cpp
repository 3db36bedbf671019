// The serving simulator with a scripted driver: a list of microbatches, each
// free to start once the one `streams` places before it has completed (a
// request's next decode waits for its last token), and the cost fit.
#include <limits>
#include <sstream>
#include <vector>

#include "catch.hpp"
#include "kpipe/schedule/render.hpp"
#include "kpipe/schedule/serve_simulate.hpp"

using namespace kpipe::schedule;

namespace {

class ListDriver : public ServeDriver {
 public:
  ListDriver(std::vector<MicrobatchWork> work, int streams, double arrival = 0.0)
      : work_(std::move(work)), streams_(streams), arrival_(arrival), done_(work_.size(), -1.0) {}

  double next_arrival() const override { return arrived_ ? std::numeric_limits<double>::infinity() : arrival_; }
  void arrive(double now) override { arrived_ = arrived_ || now >= arrival_; }
  std::optional<MicrobatchWork> next(double) override {
    if (!arrived_ || next_ == work_.size()) return std::nullopt;
    if (next_ >= static_cast<std::size_t>(streams_) && done_[next_ - streams_] < 0.0) return std::nullopt;
    return work_[next_++];
  }
  void complete(int id, double now) override { done_[static_cast<std::size_t>(id)] = now; }
  bool finished() const override { return next_ == work_.size() && (done_.empty() || done_.back() >= 0.0); }

 private:
  std::vector<MicrobatchWork> work_;
  int streams_;
  double arrival_;
  bool arrived_ = false;
  std::size_t next_ = 0;
  std::vector<double> done_;
};

std::vector<MicrobatchWork> equal_work(int m, int tokens = 8) {
  std::vector<MicrobatchWork> work;
  for (int i = 0; i < m; ++i) work.push_back({i, tokens, 0});
  return work;
}

ServeSetup stages(int p, ServeCosts costs, double transfer = 0.0) {
  return {std::vector<ServeCosts>(p, costs), transfer, 0};
}

}  // namespace

TEST_CASE("serve simulation: one stage takes the sum of the microbatch costs", "[schedule][serve]") {
  const ServeCosts costs{0.5, 0.25, 0.0625};
  std::vector<MicrobatchWork> work = {{0, 4, 10}, {1, 1, 30}, {2, 16, 136}};
  ListDriver driver(work, 1);
  const ServeSimulation r = simulate_serving(stages(1, costs), driver);
  double sum = 0.0;
  for (const auto& w : work) sum += costs.at(w.tokens, w.attended);
  CHECK(r.makespan == sum);
  CHECK(r.total_busy == sum);
  CHECK(r.bubble() == 0.0);
}

TEST_CASE("serve simulation: m equal microbatches on p stages, bubble (p-1)/m", "[schedule][serve]") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 24; ++m) {
      ListDriver driver(equal_work(m), m);  // independent: p of them in flight
      const ServeSimulation r = simulate_serving(stages(p, {1.0, 0.0, 0.0}), driver);
      CAPTURE(p, m);
      CHECK(r.makespan == m + p - 1);
      CHECK(r.pipeline_bubble().idle_over_useful * m == Approx(p - 1));
      CHECK(r.pipeline_bubble().idle_over_total * (m + p - 1) == Approx(p - 1));
      CHECK(r.bubble() == 0.0);  // each stage busy from its first start to its last end
    }
  }
}

TEST_CASE("serve simulation: a chain of dependent microbatches idles every stage p-1 of p", "[schedule][serve]") {
  const int p = 4, m = 5;
  ListDriver driver(equal_work(m), 1);  // one request decoding: each token waits for the last
  const ServeSimulation r = simulate_serving(stages(p, {2.0, 0.0, 0.0}, 0.5), driver);
  // Each round trip is p costs plus p transfers (p-1 forward, 1 back).
  CHECK(r.makespan == m * (p * 2.0 + p * 0.5));
  // Per stage: m busy costs, and m-1 waits of a round trip minus one cost.
  CHECK(r.bubble() * m == Approx((m - 1) * (p * 2.5 - 2.0) / 2.0));
}

TEST_CASE("serve simulation: at most max_in_flight microbatches and idle until the first arrival",
          "[schedule][serve]") {
  ListDriver driver(equal_work(6), 6, 3.0);
  ServeSetup setup = stages(3, {1.0, 0.0, 0.0});
  setup.max_in_flight = 1;
  const ServeSimulation r = simulate_serving(setup, driver);
  CHECK(r.microbatches.front().start[0] == 3.0);
  for (std::size_t i = 1; i < r.microbatches.size(); ++i) {
    CHECK(r.microbatches[i].start[0] >= r.microbatches[i - 1].completed);
  }
  CHECK(r.makespan == 3.0 + 6 * 3.0);
}

TEST_CASE("serve simulation: the SVG renderer draws its timeline", "[schedule][serve]") {
  ListDriver driver(equal_work(4), 4);
  const ServeSimulation r = simulate_serving(stages(2, {1.0, 0.0, 0.0}), driver);
  const Timeline timeline = serve_timeline(r, "uniform serving", "s");
  CHECK(timeline.ranks[1].size() == 4);
  CHECK(timeline.bubble.idle_over_useful == Approx(0.25));
  std::ostringstream svg;
  write_svg_timelines(svg, {timeline});
  CHECK(svg.str().find("uniform serving schedule: p = 2 ranks") != std::string::npos);
}

TEST_CASE("fit_serve_costs recovers known coefficients", "[schedule][serve]") {
  const ServeCosts truth{2e-3, 5e-5, 1e-7};
  std::vector<ServeSample> samples;
  for (int tokens : {1, 8, 33, 64}) {
    for (std::int64_t attended : {tokens * 1ll, tokens * 40ll, tokens * 500ll}) {
      samples.push_back({tokens, attended, truth.at(tokens, attended)});
    }
  }
  const ServeCosts fit = fit_serve_costs(samples);
  CHECK(fit.fixed == Approx(truth.fixed).epsilon(1e-9));
  CHECK(fit.per_token == Approx(truth.per_token).epsilon(1e-9));
  CHECK(fit.per_context == Approx(truth.per_context).epsilon(1e-9));

  // Every microbatch of one size: the fit still reproduces the samples.
  std::vector<ServeSample> one_size;
  for (std::int64_t attended : {64ll, 900ll, 4000ll}) one_size.push_back({64, attended, truth.at(64, attended)});
  const ServeCosts flat = fit_serve_costs(one_size);
  for (const ServeSample& s : one_size) CHECK(flat.at(s.tokens, s.attended) == Approx(s.seconds).epsilon(1e-9));
  CHECK(flat.per_context == Approx(truth.per_context).epsilon(1e-9));

  CHECK_THROWS(fit_serve_costs({}));
}
