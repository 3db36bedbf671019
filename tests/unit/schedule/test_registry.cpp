#include "catch.hpp"
#include "kpipe/schedule/generate.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/text_form.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

TEST_CASE("looped placement: chunk c of rank r is stage c*p + r, both ways", "[schedule][placement]") {
  const Placement one;
  CHECK(one.p() == 1);
  CHECK(one.v() == 1);
  CHECK(one.stage(0, 0) == 0);
  const Placement looped = Placement::looped(4, 3);
  REQUIRE(looped.stage_count() == 12);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) {
      const int s = looped.stage(r, c);
      CHECK(s == c * 4 + r);
      CHECK(looped.place(s).rank == r);
      CHECK(looped.place(s).chunk == c);
      if (s + 1 < 12) {
        CHECK(looped.stage(looped.next(r, c).rank, looped.next(r, c).chunk) == s + 1);
      }
      if (s > 0) {
        CHECK(looped.stage(looped.previous(r, c).rank, looped.previous(r, c).chunk) == s - 1);
      }
    }
  }
  CHECK(looped.next(3, 0).rank == 0);  // the wrap to the next chunk
  CHECK(looped.next(3, 0).chunk == 1);
}

TEST_CASE("V-shape placement: rank r holds stages r and 2p-1-r", "[schedule][placement]") {
  for (int p = 1; p <= 6; ++p) {
    const Placement vee = Placement::v_shape(p);
    REQUIRE(vee.v() == 2);
    REQUIRE(vee.stage_count() == 2 * p);
    for (int r = 0; r < p; ++r) {
      CHECK(vee.stage(r, 0) == r);
      CHECK(vee.stage(r, 1) == 2 * p - 1 - r);
      for (int c = 0; c < 2; ++c) {
        const StagePlace place = vee.place(vee.stage(r, c));
        CHECK(place.rank == r);
        CHECK(place.chunk == c);
      }
    }
    // The turn stays on rank p-1; the last stage is on rank 0, next to the first.
    CHECK(vee.next(p - 1, 0).rank == p - 1);
    CHECK(vee.next(p - 1, 0).chunk == 1);
    CHECK(vee.previous(p - 1, 1).rank == p - 1);
    CHECK(vee.place(2 * p - 1).rank == 0);
    if (p > 1) {
      CHECK(vee.previous(0, 1).rank == 1);  // stage 2p-2
      CHECK(vee.next(1, 1).rank == 0);      // stage 2p-1, the last
      CHECK(vee.next(0, 0).rank == 1);
    }
  }
}

TEST_CASE("the registry knows every schedule and suggests near misses", "[schedule][registry]") {
  // kpipe's own, first (a test below registers one more).
  const std::vector<std::string> builtins{"gpipe", "1f1b",   "interleaved", "zb-h1",      "zb-h2",
                                          "zb-v",  "v-half", "v-min",       "dualpipe-v", "forward"};
  const auto names = schedule_names();
  REQUIRE(names.size() >= builtins.size());
  CHECK(std::vector<std::string>(names.begin(), names.begin() + builtins.size()) == builtins);
  for (const std::string& name : schedule_names()) {
    const ScheduleInfo& info = find_schedule(name);
    CHECK(info.name == name);
    CHECK_FALSE(info.summary.empty());
    CHECK(info.trains == (name != "forward"));
  }
  CHECK(registered_schedule("custom") == nullptr);
  CHECK(error_of([] { find_schedule("zb-h3"); }).find("unknown schedule 'zb-h3' (did you mean") == 0);
  CHECK(error_of([] { find_schedule("zbv"); }).find("(did you mean 'zb-v'?)") != std::string::npos);
}

TEST_CASE("constraint messages speak in deck keys", "[schedule][registry]") {
  CHECK(error_of([] {
          check_shape({"zb-v", 4, 1, 8});
        }) ==
        "the zb-v schedule places two model chunks per rank in a V; set pipeline.virtual_stages = 2 (now "
        "pipeline.virtual_stages = 1)");
  CHECK(error_of([] { check_shape({"zb-v", 4, 3, 8}); }).find("set pipeline.virtual_stages = 2") != std::string::npos);
  CHECK(error_of([] {
          check_shape({"zb-h2", 4, 2, 8});
        }).find("pipeline.virtual_stages = 2 needs pipeline.schedule = \"interleaved\"") == 0);
  ShapeCheck deck{4, 2, 3, 2, 2, "pipeline.virtual_stages = 2 (run.toml:3)"};
  CHECK(error_of([&] { check_shape("interleaved", deck); }) ==
        "the interleaved schedule needs m >= p, but m = 3 microbatches < p = 4 stages; raise train.global_batch to at "
        "least 16 or lower train.microbatch_size");
  deck.v = 1;
  deck.virtual_stages_source = "pipeline.virtual_stages = 1 (run.toml:3)";
  CHECK(error_of([&] { check_shape("interleaved", deck); }) ==
        "the interleaved schedule needs pipeline.virtual_stages >= 2 model chunks per rank, but "
        "pipeline.virtual_stages = 1 (run.toml:3)");
  for (const int m : {1, 2, 3, 5}) {
    CHECK(error_of([&] { check_shape({"zb-v", 4, 2, m}); }).empty());
    CHECK(error_of([&] { check_shape({"zb-h2", 4, 1, m}); }).empty());
  }
}

TEST_CASE("generate takes the schedule's placement; schedule files take it from their name", "[schedule][registry]") {
  CHECK(generate({"zb-v", 3, 2, 6}).placement.stage(0, 1) == 5);
  CHECK(generate({"interleaved", 3, 2, 6}).placement.stage(0, 1) == 3);
  const Schedule vee = lowered("zb-v", 3, 6, 2);
  const Schedule back = checked_schedule(parse_text(to_text(vee), "zb-v.txt"));
  CHECK(back.placement.stage(0, 1) == 5);
  CHECK(back.ranks == vee.ranks);
  Schedule custom = generate({"interleaved", 3, 2, 6});
  custom.name = "my-own";
  lower(custom);
  CHECK(checked_schedule(parse_text(to_text(custom), "mine.txt")).placement.stage(0, 1) == 3);
}

namespace {

// A project's schedule, as it would define it: GPipe's order written anew.
void all_forward_then_backward(int /*rank*/, int m, std::vector<Action>& out) {
  for (int j = 0; j < m; ++j) out.push_back(compute_action(ActionKind::forward, j, 0));
  for (int j = 0; j < m; ++j) out.push_back(compute_action(ActionKind::backward, j, 0));
}

const ScheduleInfo& project_schedule() {
  static const ScheduleInfo info{
      "project-gpipe",
      "GPipe's order, registered by a project",
      true,
      [](const ScheduleSpec& spec) -> RankGenerator {
        return [m = spec.m](int rank, std::vector<Action>& out) { all_forward_then_backward(rank, m, out); };
      },
      [](const ShapeCheck& shape) -> std::optional<std::string> {
        if (shape.v == 1) return std::nullopt;
        return std::string("project-gpipe holds one chunk per rank; set pipeline.virtual_stages = 1");
      },
      [](int p, int v) { return Placement::looped(p, v); },
      [](int, int, int, const StageCosts&) -> std::optional<TheoreticalBubble> { return std::nullopt; }};
  return info;
}

}  // namespace

TEST_CASE("a project's schedule joins the registry and runs through generation, lowering and validation",
          "[schedule][registry]") {
  register_schedule(project_schedule());
  CHECK(&find_schedule("project-gpipe") == &project_schedule());
  CHECK(schedule_names().back() == "project-gpipe");
  const Schedule theirs = generate_lowered({"project-gpipe", 3, 1, 6});
  const Schedule ours = generate_lowered({"gpipe", 3, 1, 6});
  CHECK(theirs.ranks == ours.ranks);
  CHECK(error_of([] { check_shape({"project-gpipe", 2, 2, 4}); }).find("one chunk per rank") != std::string::npos);
  CHECK(error_of([] { register_schedule(project_schedule()); }).find("registered twice") != std::string::npos);
  static const ScheduleInfo incomplete{"half-done", "", true, nullptr, nullptr, nullptr, nullptr};
  CHECK(error_of([] { register_schedule(incomplete); }).find("needs a name, a generator") != std::string::npos);
}
