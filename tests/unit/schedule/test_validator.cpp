#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/schedule/text_form.hpp"
#include "kpipe/schedule/validate.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

TEST_CASE("every generated schedule validates: p <= 16, m <= 64, v <= 4", "[schedule][validate]") {
  std::size_t checked = 0;
  for (int p = 1; p <= 16; ++p) {
    for (int m = 1; m <= 64; ++m) {
      for (const char* name : {"gpipe", "1f1b", "zb-h1", "forward"}) {
        const auto problem = find_problem(lowered(name, p, m));
        CAPTURE(name, p, m);
        CHECK_FALSE(problem);
        ++checked;
      }
      for (int v = 2; v <= 4 && m >= p; ++v) {
        const auto problem = find_problem(lowered("interleaved", p, m, v));
        CAPTURE(p, m, v, problem ? problem->message : "");
        CHECK_FALSE(problem);
        ++checked;
      }
    }
  }
  CHECK(checked == 16 * 64 * 4 + 3 * (64 * 16 - 15 * 16 / 2));
}

// Each file in tests/data/bad_schedules/ is a hand-broken schedule whose
// second line is "# expect: <the start of the one-line error>".
TEST_CASE("hand-broken schedules are rejected with the expected message", "[schedule][validate]") {
  namespace fs = std::filesystem;
  const fs::path directory = fs::path(KPIPE_SCHEDULE_DATA_DIR) / "bad_schedules";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(directory)) {
    std::ifstream in(entry.path());
    std::string comment, expect;
    std::getline(in, comment);
    std::getline(in, expect);
    REQUIRE(expect.rfind("# expect: ", 0) == 0);
    expect = expect.substr(10);
    const std::string path = entry.path().string();
    const std::string error = error_of([&] { checked_schedule(read_schedule_file(path)); });
    CAPTURE(path, error);
    CHECK(error.find(expect) != std::string::npos);
    CHECK(error.rfind(path, 0) == 0);  // every message starts with the file name
    CHECK(error.find('\n') == std::string::npos);
    ++files;
  }
  CHECK(files >= 8);
}

TEST_CASE("a problem names its rank and action index", "[schedule][validate]") {
  Schedule s = lowered("1f1b", 3, 4);
  // Drop rank 2's first receive: its first forward has no input.
  REQUIRE(s.ranks[2][0].kind == ActionKind::recv_act);
  s.ranks[2].erase(s.ranks[2].begin());
  const auto problem = find_problem(s);
  REQUIRE(problem);
  CHECK(problem->rank == 2);
  CHECK(problem->action == 0);
  CHECK(error_of([&] { validate(s); }) ==
        "invalid 1f1b schedule: rank 2, action 0 (F mb=0 chunk=0): needs RECV_ACT mb=0 chunk=0 before it on rank 2, "
        "but there is none");
}

TEST_CASE("a deadlock across more ranks is found and reported as a cycle", "[schedule][validate]") {
  // Interleaved on 4 ranks: move rank 0's first backward receive in front of its
  // warm-up sends, so it waits for a gradient that needs its own activations.
  Schedule s = lowered("interleaved", 4, 4, 2);
  auto& rank0 = s.ranks[0];
  const auto first_recv_grad =
      std::find_if(rank0.begin(), rank0.end(), [](const Action& a) { return a.kind == ActionKind::recv_grad; });
  REQUIRE(first_recv_grad != rank0.end());
  const Action wait = *first_recv_grad;
  rank0.erase(first_recv_grad);
  rank0.insert(rank0.begin() + 2, wait);  // after F mb=0 chunk=0 and its send
  const auto problem = find_problem(s);
  REQUIRE(problem);
  CHECK(problem->message.rfind("deadlock across ranks: rank ", 0) == 0);
  CHECK(problem->message.find("blocks at action") != std::string::npos);
}

TEST_CASE("forward-only schedules take no loss or step actions", "[schedule][validate]") {
  Schedule s = lowered("forward", 2, 2);
  s.ranks[1].push_back(step_action(ActionKind::optimizer_step));
  CHECK(error_of([&] { validate(s); }) ==
        "invalid forward schedule: rank 1, action 4 (OPTIMIZER_STEP): a forward-only schedule has no LOSS, "
        "REDUCE_GRADS or OPTIMIZER_STEP");
}

TEST_CASE("a missing microbatch or a missing backward is named", "[schedule][validate]") {
  Schedule forward = generate({"forward", 1, 1, 3});
  forward.ranks[0].pop_back();
  CHECK(find_problem(forward)->message ==
        "rank 0: F mb=2 chunk=0 is missing; every microbatch passes every model stage");
  Schedule training = lowered("gpipe", 1, 2);
  training.ranks[0].erase(training.ranks[0].begin() + 4);  // F0 LOSS0 F1 LOSS1 [BW0] BW1 ...
  CHECK(find_problem(training)->message == "rank 0: mb=0 chunk=0 has no backward pass (BW, or B and W)");
}

TEST_CASE("find_problems: every rank's first problem; the grid marks each, with the rows around it",
          "[schedule][validate]") {
  Schedule s = lowered("1f1b", 2, 16);
  // Plant two problems: rank 0 forwards microbatch 0 twice, rank 1 drops its last backward.
  s.ranks[0][2] = s.ranks[0][0];
  const auto last_backward = std::find_if(s.ranks[1].rbegin(), s.ranks[1].rend(),
                                          [](const Action& a) { return a.kind == ActionKind::backward; });
  REQUIRE(last_backward != s.ranks[1].rend());
  s.ranks[1].erase(std::next(last_backward).base());
  const std::vector<Problem> problems = find_problems(s);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].rank == 0);
  CHECK(problems[0].action == 2);
  CHECK(problems[1].rank == 1);
  CHECK(find_problem(s)->message == problems[0].message);

  const std::string grid = problem_grid(s, problems);
  CAPTURE(grid);
  CHECK(std::count(grid.begin(), grid.end(), '>') == 3);  // two marks and the legend's
  CHECK(grid.find(">F0<") != std::string::npos);
  // Rows far from both problems are left out, and the gap is shown.
  CHECK(grid.find("\n    ...\n") != std::string::npos);
  // A problem tied to no action (a wrong header) draws no grid.
  CHECK(problem_grid(s, {Problem{-1, -1, "p = 0"}}).empty());
}
