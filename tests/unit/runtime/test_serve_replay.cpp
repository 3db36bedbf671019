// The committed example traces through the batching scheduler and the
// serving simulator: both parse for the serving deck's model, every request
// is served, and uniform microbatches leave a smaller bubble than the
// prefill-first baseline (DESIGN.md §5b).
#include <string>

#include "catch.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"
#include "kpipe/runtime/serving/serve_replay.hpp"

using namespace kpipe;

namespace {

// inputs/kjv-serve.toml's model.
constexpr int context = 512;
constexpr int vocab = 63;

const std::string examples = std::string(KPIPE_SOURCE_DIR) + "/examples/inference/";

schedule::ServeSimulation replay(const runtime::Trace& trace, config::Batching policy) {
  // 2 stages; a microbatch costs 1 ms plus 0.1 ms per token plus attention.
  const schedule::ServeSetup setup{std::vector<schedule::ServeCosts>(2, {1e-3, 1e-4, 2e-7}), 5e-5, 0};
  runtime::ReplayDriver driver(trace.requests, {policy, 64, 16, 1024, 16, context});
  const schedule::ServeSimulation result = schedule::simulate_serving(setup, driver);
  CHECK(driver.refusals().empty());
  for (const runtime::RequestTimes& t : driver.times()) {
    CHECK(t.first_token >= t.arrival);
    CHECK(t.finished >= t.first_token);
  }
  return result;
}

}  // namespace

TEST_CASE("example traces: uniform batching leaves a smaller bubble than request batching", "[runtime][serve]") {
  const runtime::Trace trace =
      runtime::read_request_trace(examples + "synthetic.jsonl", runtime::synthetic_vocabulary(vocab), context);
  REQUIRE_FALSE(trace.error);
  REQUIRE(trace.requests.size() == 64);
  const auto uniform = replay(trace, config::Batching::uniform);
  const auto request = replay(trace, config::Batching::request);
  for (const auto& m : uniform.microbatches) CHECK(m.work.tokens <= 64);
  CAPTURE(uniform.bubble(), request.bubble(), uniform.makespan, request.makespan);
  CHECK(uniform.bubble() < request.bubble());
}

TEST_CASE("example traces: the KJV trace encodes with the KJV text's vocabulary", "[runtime][serve]") {
  // The sorted distinct characters of examples/lm/kjv.txt (prepare_kjv.sh), which the tests do not have.
  const auto kjv = model::Vocabulary::of_text("\n !'(),-.:;?ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz");
  REQUIRE(kjv.size() == vocab);
  const runtime::Trace trace = runtime::read_request_trace(examples + "kjv.jsonl", kjv, context);
  CHECK(trace.error.value_or("") == "");
  CHECK(trace.requests.size() == 64);
  CHECK(trace.clipped.empty());
  // The trace for the trained example model, whose context is 64.
  const runtime::Trace small = runtime::read_request_trace(examples + "kjv-char.jsonl", kjv, 64);
  CHECK(small.error.value_or("") == "");
  CHECK(small.requests.size() == 32);
  CHECK(small.clipped.empty());
}
