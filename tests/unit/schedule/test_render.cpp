#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.hpp"
#include "kpipe/schedule/render.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::size_t compute_count(const Schedule& s) {
  std::size_t n = 0;
  for (int r = 0; r < s.p; ++r) n += compute_actions(s, r).size();
  return n;
}

}  // namespace

TEST_CASE("the ASCII timeline draws 1F1B as in the papers", "[schedule][render]") {
  // F = BW = 1 on 2 ranks: rank 1 runs F0 BW0 F1 BW1 from t = 1, rank 0 waits
  // for each gradient. Four columns per time unit fit "BW0" and a space.
  const Schedule s = lowered("1f1b", 2, 2);
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  const auto timeline = ascii_timeline(s, r, 80);
  REQUIRE(timeline);
  CHECK(*timeline ==
        "time    0                   5\n"
        "rank 0 |F0  F1  ....BW0 ....BW1\n"
        "rank 1 |....F0  BW0 F1  BW1 ....\n"
        "F forward, B input gradient, W weight gradient, BW full backward; F3 = microbatch 3; . idle\n");
  CHECK_FALSE(ascii_timeline(s, r, 31));
  CHECK(ascii_timeline(s, r, 32));
}

TEST_CASE("the ASCII timeline labels chunks when v > 1", "[schedule][render]") {
  const Schedule s = lowered("interleaved", 2, 2, 2);
  const auto timeline = ascii_timeline(s, simulate(s, unit_forward_and_backward()), 200);
  REQUIRE(timeline);
  CHECK(timeline->find("F1.1") != std::string::npos);
  CHECK(timeline->find("BW0.0") != std::string::npos);
}

TEST_CASE("the SVG timeline has a labelled box per compute action", "[schedule][render]") {
  const Schedule s = lowered("zb-h1", 4, 8);
  const SimulationResult r = simulate(s, unit_forward_input_weight());
  std::ostringstream out;
  write_svg_timeline(out, s, r);
  const std::string svg = out.str();
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(count(svg, "<title>") == compute_count(s));
  CHECK(count(svg, "<title>rank 3: W mb=7 chunk=0</title>") == 1);
  for (const char* label : {">rank 0<", ">rank 3<", ">F forward<", ">B input gradient<", ">W weight gradient<",
                            ">idle<", "zb-h1 schedule: p = 4 ranks"}) {
    CHECK(svg.find(label) != std::string::npos);
  }
  CHECK(svg.find(">BW full backward<") == std::string::npos);  // only kinds the schedule has
}

TEST_CASE("an SVG of a huge plan is refused with a pointer to --trace", "[schedule][render]") {
  const Schedule s = lowered("1f1b", 64, 1024);
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  std::ostringstream out;
  CHECK(error_of([&] { write_svg_timeline(out, s, r); }).find("use --trace") != std::string::npos);
  CHECK(out.str().empty());
}

TEST_CASE("the Chrome trace has one complete event per compute action and one per wait", "[schedule][render]") {
  CostModel costs = unit_forward_and_backward();
  costs.comm_latency = 0.25;
  const Schedule s = lowered("1f1b", 3, 4);
  const SimulationResult r = simulate(s, costs);
  std::ostringstream out;
  write_chrome_trace(out, s, r);
  const auto trace = nlohmann::json::parse(out.str());
  std::size_t compute = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const int rank = event["tid"];
    CHECK(event["ts"].get<double>() >= 0.0);
    CHECK(event["ts"].get<double>() + event["dur"].get<double>() <= r.makespan * 1000.0);
    if (event["cat"] != "wait") {
      ++compute;
      CHECK(rank >= 0);
    }
  }
  CHECK(compute == compute_count(s));
  CHECK(trace["traceEvents"][0]["args"]["name"] == "kpipe plan: 1f1b p=3 v=1 m=4");
}

TEST_CASE("a schedule name cannot inject markup into the SVG or break the trace JSON", "[schedule][render]") {
  // The parser refuses such names; the renderers escape them all the same.
  Schedule s = lowered("1f1b", 2, 2);
  s.name = "x\"'</text><script>alert(1)</script>&";
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  std::ostringstream svg;
  write_svg_timeline(svg, s, r);
  CHECK(svg.str().find("<script") == std::string::npos);
  CHECK(svg.str().find("x&quot;&apos;&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp; schedule") !=
        std::string::npos);
  std::ostringstream trace;
  write_chrome_trace(trace, s, r);
  const auto json = nlohmann::json::parse(trace.str());
  CHECK(json["traceEvents"][0]["args"]["name"] == "kpipe plan: " + s.name + " p=2 v=1 m=2");
}

TEST_CASE("an SVG too large to draw is refused from a count, before any drawing", "[schedule][render]") {
  CHECK(error_of([] { require_svg_fits(100000); }).empty());
  CHECK(error_of([] { require_svg_fits(4096.0 * 10000); }) ==
        "the SVG timeline would draw 40960000 boxes; it is meant for plans of at most 100000 compute actions: use "
        "--trace (Perfetto) for this plan, or plan fewer ranks or microbatches");
}

TEST_CASE("the JSON summary carries both bubbles, labelled, and every rank", "[schedule][render]") {
  const Schedule s = lowered("1f1b", 4, 8);
  const CostModel costs = unit_forward_and_backward();
  const SimulationResult r = simulate(s, costs);
  const auto json = nlohmann::json::parse(summary_json(s, costs, r, post_validated_bubble(s, costs), 2));
  CHECK(json["schedule"] == "1f1b");
  CHECK(json["d"] == 2);
  CHECK(json["m"] == 8);
  CHECK(json["makespan"] == 22.0);
  CHECK(json["bubble"]["theoretical"]["formula_idle_over_useful"] == "(p-1)/m");
  CHECK(json["bubble"]["theoretical"]["idle_over_useful"] == Approx(3.0 / 8));
  CHECK(json["bubble"]["simulated"]["idle_over_total"] == Approx(3.0 / 11));
  // 1F1B's rank 0 ends a step last and starts the next first: no barrier changes nothing.
  CHECK(json["bubble"]["simulated_post_validated"]["idle_over_useful"] == Approx(3.0 / 8));
  REQUIRE(json["ranks"].size() == 4);
  CHECK(json["ranks"][3]["peak_stashed_activations"] == 1);
}

TEST_CASE("the summary table lists every rank and a total", "[schedule][render]") {
  const Schedule s = lowered("gpipe", 3, 4);
  const std::string table = summary_table(s, simulate(s, unit_forward_and_backward()));
  CHECK(count(table, "\n") == 5);  // header, 3 ranks, total
  CHECK(table.find("all") != std::string::npos);
  const Schedule wide = generate({"forward", 100, 1, 1});
  Schedule lowered_wide = wide;
  lower(lowered_wide);
  const std::string long_table = summary_table(lowered_wide, simulate(lowered_wide, CostModel{}));
  CHECK(long_table.find("68 ranks not shown") != std::string::npos);
}

TEST_CASE("summarize counts a timeline's bubble as the simulator does", "[schedule][render]") {
  const Schedule s = lowered("1f1b", 4, 8);
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  Timeline t = simulated_timeline(s, r);
  t.makespan = 0.0;
  t.bubble = {};
  summarize(t);
  CHECK(t.makespan == Approx(r.makespan));
  CHECK(t.bubble.idle_over_useful == Approx(r.bubble().idle_over_useful));
  CHECK(t.bubble.idle_over_total == Approx(r.bubble().idle_over_total));
}

TEST_CASE("several timelines share one SVG, each with its label and bubble", "[schedule][render]") {
  const Schedule s = lowered("interleaved", 2, 4, 2);
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  Timeline measured = simulated_timeline(s, r);
  measured.label = "measured, step <1>";
  measured.unit = "ms";
  for (auto& actions : measured.ranks) {
    for (auto& a : actions) a.end += 0.5 * (a.end - a.start);
  }
  summarize(measured);
  Timeline simulated = simulated_timeline(s, r);
  simulated.label = "simulated";
  simulated.unit = "ms";
  std::ostringstream out;
  write_svg_timelines(out, {measured, simulated});
  const std::string svg = out.str();
  CHECK(count(svg, "<title>") == 2 * compute_count(s));
  CHECK(count(svg, "<title>rank 1: F mb=3 chunk=1</title>") == 2);
  CHECK(svg.find("measured, step &lt;1&gt;: makespan") < svg.find("simulated: makespan"));
  CHECK(count(svg, "time (ms)") == 2);
  CHECK(svg.find(">chunk 1<") != std::string::npos);
}

TEST_CASE("the Chrome trace of a timeline has one event per action, one process per rank", "[schedule][render]") {
  const Schedule s = lowered("1f1b", 3, 4);
  const SimulationResult r = simulate(s, unit_forward_and_backward());
  Timeline t = simulated_timeline(s, r);
  std::ostringstream out;
  write_chrome_trace(out, t, {"kpipe profile \"x\"", 1000.0});
  const auto trace = nlohmann::json::parse(out.str());
  std::size_t events = 0, forwards = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    ++events;
    CHECK(event["tid"] == 0);
    if (event["name"] == "F mb=2 chunk=0") ++forwards;
  }
  CHECK(events == s.action_count());
  CHECK(forwards == 3);  // one per rank
  CHECK(trace["traceEvents"][0]["args"]["name"] == "kpipe profile \"x\" rank 0");
}
