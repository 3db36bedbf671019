#include "catch.hpp"
#include "kpipe/schedule/text_form.hpp"
#include "kpipe/schedule/validate.hpp"
#include "schedule_test_support.hpp"

using namespace kpipe::schedule;
using namespace kpipe::schedule::testing;

namespace {

const std::string data = KPIPE_SCHEDULE_DATA_DIR;

void check_same(const Schedule& a, const Schedule& b) {
  CHECK(a.name == b.name);
  CHECK(a.p == b.p);
  CHECK(a.v == b.v);
  CHECK(a.m == b.m);
  CHECK(a.ranks == b.ranks);
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_text(text, "test.txt"); });
}

}  // namespace

TEST_CASE("the text form round-trips every generated schedule", "[schedule][text]") {
  for (const auto& spec : std::vector<ScheduleSpec>{
           {"gpipe", 3, 1, 5}, {"1f1b", 4, 1, 6}, {"interleaved", 3, 3, 7}, {"zb-h1", 4, 1, 9}, {"forward", 2, 1, 3}}) {
    const Schedule original = lowered(spec.name, spec.p, spec.m, spec.v);
    const ScheduleFile file = parse_text(to_text(original), "round-trip.txt");
    CAPTURE(spec.name);
    check_same(file.schedule, original);
    // Line numbers point back into the text: header comment, header, "rank 0", first action.
    CHECK(file.lines[0][0] == 4);
  }
}

TEST_CASE("a compute-only file is lowered to what the generator gives", "[schedule][text]") {
  check_same(checked_schedule(read_schedule_file(data + "/schedules/1f1b-p2-m4.txt")), lowered("1f1b", 2, 4));
}

TEST_CASE("a complete hand-written file is taken as it is", "[schedule][text]") {
  check_same(checked_schedule(read_schedule_file(data + "/schedules/gpipe-p2-m2-lowered.txt")), lowered("gpipe", 2, 2));
}

TEST_CASE("a hand-written variant validates and simulates", "[schedule][text]") {
  const Schedule custom = checked_schedule(read_schedule_file(data + "/schedules/low-memory-1f1b-p3-m4.txt"));
  const SimulationResult r = simulate(custom, unit_forward_and_backward());
  const SimulationResult reference = simulate(lowered("1f1b", 3, 4), unit_forward_and_backward());
  CHECK(r.ranks[0].peak_stashed == 2);
  CHECK(reference.ranks[0].peak_stashed == 3);
  CHECK(r.makespan > reference.makespan);
}

TEST_CASE("text-form mistakes name the file, the line and the token", "[schedule][text]") {
  const std::string header = "schedule name=x p=2 v=1 m=4\nrank 0\n";
  CHECK(parse_error(header + "  SEND_AKT mb=0 chunk=0 peer=1 tag=0\n") ==
        "test.txt:3: unknown action 'SEND_AKT' (did you mean 'SEND_ACT'?); actions are F, B, W, BW, SEND_ACT, "
        "RECV_ACT, SEND_GRAD, RECV_GRAD, LOSS, REDUCE_GRADS, OPTIMIZER_STEP or F&B");
  CHECK(parse_error(header + "F mb=0\n") == "test.txt:3: F needs chunk=; write e.g. 'F mb=0 chunk=0'");
  CHECK(parse_error(header + "F&B mb=1 chunk=0\n") ==
        "test.txt:3: F&B needs bw_mb=; write e.g. 'F&B mb=1 chunk=0 bw_mb=0 bw_chunk=1'");
  CHECK(parse_error(header + "F&B mb=1 chunk=0 bw_mb=0 peer=1\n") ==
        "test.txt:3: unknown field 'peer'; F&B takes mb, chunk, bw_mb and bw_chunk");
  CHECK(parse_error(header + "F mb=4 chunk=0\n") ==
        "test.txt:3: mb=4 is out of range: the schedule has m = 4 microbatches, numbered 0 to 3");
  CHECK(parse_error(header + "F mb=0 chunk=1\n") ==
        "test.txt:3: chunk=1 is out of range: the schedule has v = 1 chunks per rank, numbered 0 to 0");
  CHECK(parse_error(header + "F mb=-1 chunk=0\n").find("mb=-1 is out of range") != std::string::npos);
  CHECK(parse_error(header + "F mb=1x chunk=0\n") == "test.txt:3: mb=1x: '1x' is not an integer");
  CHECK(parse_error(header + "F mb=0 mb=1 chunk=0\n") == "test.txt:3: field 'mb' given twice");
  CHECK(parse_error(header + "F mb=0 chunk=0 peer=1\n") == "test.txt:3: unknown field 'peer'; F takes mb and chunk");
  CHECK(parse_error(header + "F mb=0 chnk=0\n") ==
        "test.txt:3: unknown field 'chnk' (did you mean 'chunk'?); F takes mb and chunk");
  CHECK(parse_error(header + "REDUCE_GRADS mb=0\n") == "test.txt:3: unknown field 'mb'; REDUCE_GRADS takes no fields");
  CHECK(parse_error(header + "F mb\n") == "test.txt:3: expected key=value after F, got 'mb'");
  CHECK(parse_error(header + "SEND_ACT mb=0 chunk=0 peer=2 tag=0\n").find("peer=2 is out of range") !=
        std::string::npos);
  CHECK(parse_error("schedule name=x p=2 v=1 m=4\nF mb=0 chunk=0\n") ==
        "test.txt:2: action 'F' before the first 'rank N' line");
  CHECK(parse_error(header + "rank 2\n") == "test.txt:3: rank 2 is out of range: ranks are numbered 0 to 1 (p = 2)");
  CHECK(parse_error(header + "rank 0\n") == "test.txt:3: rank 0 appears twice (first at line 2)");
  CHECK(parse_error("schedule name=x p=2 v=1\n") ==
        "test.txt:1: the header needs m=; write e.g. 'schedule name=custom p=4 v=1 m=8'");
  CHECK(parse_error("schedule name=x p=0 v=1 m=1\n") ==
        "test.txt:1: p=0 is out of range: p must be 1 to 4096 pipeline ranks");
  CHECK(parse_error(header + "schedule name=y p=2 v=1 m=4\n") ==
        "test.txt:3: a second 'schedule' header (the first is at line 1)");
  CHECK(parse_error("# nothing here\n\n") ==
        "test.txt: no 'schedule name=NAME p=P v=V m=M' header line; this is not a kpipe schedule file");
}

TEST_CASE("an unreadable schedule file is an input error", "[schedule][text]") {
  CHECK(error_of([] { read_schedule_file("no/such/schedule.txt"); }) ==
        "cannot open schedule file 'no/such/schedule.txt': no such file; pipeline.schedule_file is relative to the "
        "working directory");
}

TEST_CASE("a schedule file is bounded before anything is allocated per microbatch", "[schedule][text]") {
  CHECK(parse_error("schedule name=x p=1 v=1 m=1073741824\nrank 0\nF mb=0 chunk=0\n") ==
        "test.txt:1: p = 1, v = 1, m = 1073741824 make a plan of about 6442 million actions; kpipe plans at most 250 "
        "million (p·v·m <= 42 million)");
  CHECK(parse_error("# few actions\nschedule name=x p=2 v=1 m=5000\nrank 0\nF mb=0 chunk=0\n") ==
        "test.txt:2: the header says p·v·m = 2·1·5000 = 10000 forward passes, but the file has 1 F action; fix p=, v= "
        "or m= in the header, or add the missing F actions");
  // A few missing forwards are the validator's to name, with their line.
  CHECK(parse_error("schedule name=x p=2 v=1 m=2000\nrank 0\nF mb=0 chunk=0\n").empty());
}

TEST_CASE("a schedule name is plain text, safe in SVG, JSON and terminals", "[schedule][text]") {
  CHECK(parse_error("schedule name=x\"</text><script> p=1 v=1 m=1\n") ==
        "test.txt:1: name='x\"</text><script>': a schedule name is 1 to 64 letters, digits, '.', '_' or '-', e.g. "
        "name=my-1f1b");
  CHECK(parse_error("schedule name=" + std::string(65, 'a') + " p=1 v=1 m=1\n").find("1 to 64 letters") !=
        std::string::npos);
  CHECK(parse_text("schedule name=My_1f1b.v2-b p=1 v=1 m=1\nrank 0\nF mb=0 chunk=0\n", "t.txt").schedule.name ==
        "My_1f1b.v2-b");
}

TEST_CASE("a UTF-8 byte order mark before the header is accepted", "[schedule][text]") {
  const ScheduleFile file = parse_text("\xEF\xBB\xBFschedule name=x p=1 v=1 m=1\nrank 0\nF mb=0 chunk=0\n", "t.txt");
  CHECK(file.schedule.m == 1);
  CHECK(file.lines[0][0] == 3);
}
