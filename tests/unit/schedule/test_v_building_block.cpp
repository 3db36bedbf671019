// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable
// Memory", NeurIPS 2024) against the authors' statements: activation memory
// of (p+2)//2 and (p+4)//3 stage-microbatches per rank, and at F = B = W a
// bubble of about a half and two thirds of 1F1B's (p-1)/(m+p-1).
#include <map>
#include <tuple>

#include "catch.hpp"
#include "kpipe/schedule/registry.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

// The authors' table, in stage-microbatches held from F to W.
int authors_bound(const std::string& name, int p) { return name == "v-half" ? (p + 2) / 2 : (p + 4) / 3; }

}  // namespace

TEST_CASE("v-half and v-min: valid, one F, B and W per microbatch and chunk, within the authors' memory bound",
          "[schedule][v-building-block]") {
  for (const std::string name : {"v-half", "v-min"}) {
    for (int p = 1; p <= 9; ++p) {
      for (const int m : {1, p, 2 * p, 3 * p + 1, 4 * p}) {
        CAPTURE(name, p, m);
        const Schedule s = lowered(name, p, m, 2);  // lowered() validates
        REQUIRE(activation_bound(s));
        CHECK(activation_bound(s)->stage_microbatches == authors_bound(name, p));
        for (int r = 0; r < p; ++r) {
          std::map<std::tuple<ActionKind, int, int>, int> runs;
          for (const Action& a : s.ranks[r]) {
            if (is_compute(a.kind)) ++runs[{a.kind, a.microbatch, a.chunk}];
          }
          CHECK(runs.size() == static_cast<std::size_t>(3 * 2 * m));
          for (const auto& [action, count] : runs) CHECK(count == 1);
          CHECK(s.peak_held_stage_microbatches(r) <= authors_bound(name, p));
        }
        // 1F1B holds p on its first rank: the V's hold a half and a third of it.
        if (m >= 2 * p && p >= 3) CHECK(s.peak_held_stage_microbatches(0) < p);
      }
    }
  }
}

TEST_CASE("v-half and v-min at F = B = W, m >= 4p: about a half and two thirds of 1F1B's bubble",
          "[schedule][v-building-block]") {
  const CostModel costs = unit_forward_input_weight();
  for (const int p : {4, 8}) {
    for (const int m : {4 * p, 8 * p}) {
      CAPTURE(p, m);
      const double one_f_one_b = (p - 1.0) / (m + p - 1.0);  // idle/total at F = B = W
      const double half = simulate(lowered("v-half", p, m, 2), costs).bubble().idle_over_total;
      const double min = simulate(lowered("v-min", p, m, 2), costs).bubble().idle_over_total;
      CHECK(half <= 0.6 * one_f_one_b);
      CHECK(min <= 0.7 * one_f_one_b);
      CHECK(half < min);
    }
  }
}

TEST_CASE("v-half and v-min place two chunks per rank in a V", "[schedule][v-building-block]") {
  CHECK(error_of([] {
          check_shape({"v-min", 4, 1, 8});
        }) ==
        "the v-min schedule places two model chunks per rank in a V; set pipeline.virtual_stages = 2 (now "
        "pipeline.virtual_stages = 1)");
  CHECK(error_of([] {
          check_shape({"v-half", 4, 3, 8});
        }).find("set pipeline.virtual_stages = 2") != std::string::npos);
  CHECK(generate({"v-half", 3, 2, 6}).placement.stage(0, 1) == 5);
}
