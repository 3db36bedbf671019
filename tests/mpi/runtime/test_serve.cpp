// kpipe serve against a sequential, non-pipelined, non-batched reference
// decoder: greedy tokens must be identical for every request, on p = 1, 2, 4
// ranks, under both batching policies, with a token budget small enough to
// chunk prefills, and with a KV cache small enough that requests must wait
// for each other's blocks. The reference runs the whole model on the full
// window for every new token (no cache, no batching): an independent path.
// With t = 2 tensor ranks per stage the served tokens, greedy and sampled,
// are t = 1's, and the KV cache budget, per tensor rank, holds twice the
// blocks.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <random>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/serving/serve.hpp"

using namespace kpipe;

namespace {

constexpr int vocab = 13;
constexpr int context = 24;

// A tiny transformer, or with `llama` a Llama whose 2 query heads share one
// key/value head (at t = 2 both ranks hold and cache it).
config::RunConfig deck(int p, const std::string& batching, int token_budget, double kv_cache_mib, int t = 1,
                       bool llama = false) {
  const std::string family = llama ? "model.kind = \"llama\"\nmodel.kv_heads = 1\nmodel.ffn_dim = 24\n"
                                   : "model.kind = \"transformer\"\nmodel.mlp_ratio = 2\n";
  const std::string text =
      fmt::format("pipeline.tensor_parallel = {}\n", t) + family +
      fmt::format(
          "model.vocab = {}\nmodel.context = {}\nmodel.dim = 16\nmodel.heads = 2\n"
          "model.layers = 4\nmodel.seed = 5\ntrain.global_batch = 4\ntrain.microbatch_size = 1\n"
          "pipeline.stages = {}\ninference.batching = \"{}\"\ninference.token_budget = {}\ninference.max_sequences = "
          "4\n"
          "inference.kv_cache_mib = {}\ninference.block_tokens = 4\nruntime.watchdog_seconds = 60\n",
          vocab, context, p, batching, token_budget, kv_cache_mib);
  return config::run_config(config::parse_deck(text, "serve.toml"));
}

// Prompts of 1 to 14 tokens and 1 to 9 new tokens, all arriving at once.
std::vector<runtime::Request> requests() {
  std::mt19937 random(42);
  std::vector<runtime::Request> all;
  for (int id = 0; id < 10; ++id) {
    runtime::Request request;
    request.id = id;
    request.prompt.resize(1 + random() % 14);
    for (int& token : request.prompt) token = static_cast<int>(random() % vocab);
    request.max_new_tokens = 1 + static_cast<int>(random() % 9);
    all.push_back(request);
  }
  return all;
}

// Greedy continuation of `prompt` by the whole model, recomputing the full
// window for every token. Its logits are `padded` wide (ModelSpec::padded_vocab),
// the tokens past `vocab` padding.
std::vector<int> reference_decode(model::Stage<double>& model, int padded, std::vector<int> prompt, int tokens) {
  std::vector<int> generated;
  for (int n = 0; n < tokens; ++n) {
    const int length = static_cast<int>(prompt.size());
    std::vector<double> window(context, 0.0);
    std::copy(prompt.begin(), prompt.end(), window.begin());
    const auto X = tensor::uninitialized_matrix<double>("x", 1, context);
    tensor::from_host<double>(window, X);
    const auto Y = tensor::uninitialized_matrix<double>("y", 1, context * padded);
    model.forward_no_grad(X, Y);
    const auto logits = tensor::to_host<double>(Y);
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(length - 1) * padded;
    const int token = static_cast<int>(std::max_element(row, row + vocab) - row);
    generated.push_back(token);
    prompt.push_back(token);
  }
  return generated;
}

// The inference.kv_cache_mib that gives every stage `blocks` KV blocks of 4
// tokens: the stage with the most decoder blocks sets the size of one.
double kv_cache_mib_for(const config::RunConfig& config, int blocks) {
  const auto spec = model::TrainerSpec::from_config(config);
  int most = 0;
  for (const auto& stage : spec.stages)
    most = std::max(most, static_cast<int>(model::decoder_blocks(spec.model, stage).size()));
  return (blocks + 0.5) *
         static_cast<double>(model::kv_block_bytes(most, model::kv_width(spec.model), 4, tensor::DType::float64)) /
         (1 << 20);
}

}  // namespace

TEST_CASE("served greedy tokens equal the sequential reference decoder", "[runtime][serve]") {
  const int p = comm::size_of(comm::world());
  const auto trace = requests();
  const config::RunConfig reference_config = deck(1, "uniform", 8, 1.0);
  const auto spec = model::TrainerSpec::from_config(reference_config);
  tensor::ExecContext exec;
  model::Stage<double> whole(spec.model, model::LayerRange{0, static_cast<int>(spec.model.layers().size())}, {}, exec);
  std::vector<std::vector<int>> expected;
  for (const auto& request : trace)
    expected.push_back(reference_decode(whole, spec.model.padded_vocab(1), request.prompt, request.max_new_tokens));

  // 8 blocks of 4 tokens hold the largest request (14 + 9 tokens: 6
  // blocks) but not the trace at once, so admission must wait for releases.
  for (const bool small_cache : {false, true}) {
    for (const auto& [batching, budget] : {std::pair{"uniform", 5}, {"uniform", 64}, {"request", 64}}) {
      config::RunConfig config = deck(p, batching, budget, 1.0);
      if (small_cache) config = deck(p, batching, budget, kv_cache_mib_for(config, 8));
      runtime::Pipeline<double> pipeline(config, comm::world(), runtime::Mode::infer);
      const runtime::ServeResult result = runtime::serve(pipeline, trace, config.inference);
      if (comm::rank_of(comm::world()) != 0) continue;
      INFO(fmt::format("p={} batching={} budget={} small KV cache={}", p, batching, budget, small_cache));
      REQUIRE(result.requests.size() == trace.size());
      for (std::size_t r = 0; r < trace.size(); ++r) {
        INFO("request " << r);
        CHECK(result.requests[r].rejected.empty());
        CHECK(result.requests[r].generated == expected[r]);
      }
      CHECK(result.peak_kv_blocks <= result.kv_blocks);
      if (small_cache) CHECK(result.kv_blocks == 8);
    }
  }
}

TEST_CASE("a request that can never fit the KV cache is rejected and the others are served", "[runtime][serve]") {
  const int p = comm::size_of(comm::world());
  auto trace = requests();
  trace[3].prompt.assign(14, 1);
  trace[3].max_new_tokens = 9;  // 23 tokens: 6 blocks of 4, one more than the cache
  config::RunConfig config = deck(p, "uniform", 5, 1.0);
  config = deck(p, "uniform", 5, kv_cache_mib_for(config, 5));
  runtime::Pipeline<double> pipeline(config, comm::world(), runtime::Mode::infer);
  const runtime::ServeResult result = runtime::serve(pipeline, trace, config.inference);
  if (comm::rank_of(comm::world()) != 0) return;
  REQUIRE(result.requests.size() == trace.size());
  CHECK_THAT(result.requests[3].rejected, Catch::Matchers::Contains("need 6 KV blocks"));
  CHECK(result.requests[3].generated.empty());
  for (std::size_t r = 0; r < trace.size(); ++r) {
    const auto tokens = trace[r].prompt.size() + static_cast<std::size_t>(trace[r].max_new_tokens);
    if ((tokens - 1 + 3) / 4 > 5) continue;  // the last token is never cached
    INFO("request " << r);
    CHECK(result.requests[r].rejected.empty());
    CHECK(result.requests[r].generated.size() == static_cast<std::size_t>(trace[r].max_new_tokens));
  }
  CHECK(result.peak_kv_blocks <= 5);
}

// Multi-head attention's ranks cache half the heads each, so the same MiB
// holds twice the blocks; a Llama's ranks that share its one key/value head
// each cache all of it.
TEST_CASE("t = 2 serves the tokens of t = 1, greedy and sampled, with twice the KV blocks unless heads are shared",
          "[runtime][serve][np2][np4]") {
  const int world = comm::size_of(comm::world());
  const int p = world / 2;
  const auto trace = requests();
  for (const auto& [llama, temperature] : {std::pair{false, 0.0}, std::pair{false, 0.8}, std::pair{true, 0.0}}) {
    INFO(fmt::format("p={} llama {} temperature={}", p, llama, temperature));
    // t = 1 on the first p ranks, then t = 2 on all: world rank 0 schedules both.
    std::vector<std::vector<int>> expected;
    int blocks = 0;
    MPI_Comm first;
    MPI_Comm_split(MPI_COMM_WORLD, comm::rank_of(comm::world()) < p ? 0 : MPI_UNDEFINED, 0, &first);
    config::RunConfig config = deck(p, "uniform", 5, 1.0, 1, llama);
    config = deck(p, "uniform", 5, kv_cache_mib_for(config, 8), 1, llama);
    config.inference.temperature = temperature;
    config.inference.seed = 7;
    if (first != MPI_COMM_NULL) {
      runtime::Pipeline<double> pipeline(config, first, runtime::Mode::infer);
      const runtime::ServeResult result = runtime::serve(pipeline, trace, config.inference);
      for (const auto& served : result.requests) expected.push_back(served.generated);
      blocks = result.kv_blocks;
      MPI_Comm_free(&first);
    }
    config::RunConfig split = deck(p, "uniform", 5, config.inference.kv_cache_mib, 2, llama);
    split.inference.temperature = temperature;
    split.inference.seed = 7;
    runtime::Pipeline<double> pipeline(split, comm::world(), runtime::Mode::infer);
    CHECK(pipeline.grid().tensor_size() == 2);
    const runtime::ServeResult result = runtime::serve(pipeline, trace, split.inference);
    if (comm::rank_of(comm::world()) != 0) continue;
    REQUIRE(result.requests.size() == trace.size());
    REQUIRE(expected.size() == trace.size());
    for (std::size_t r = 0; r < trace.size(); ++r) {
      INFO("request " << r);
      CHECK(result.requests[r].rejected.empty());
      CHECK(result.requests[r].generated == expected[r]);
    }
    CHECK(blocks == 8);
    if (llama) {
      CHECK(result.kv_blocks == blocks);
    } else {
      CHECK(result.kv_blocks >= 2 * blocks);
    }
    CHECK(result.peak_kv_blocks <= result.kv_blocks);
  }
}

TEST_CASE("t = 2 tensor ranks wait out a gap in the trace longer than the watchdog", "[runtime][serve][np2][np4]") {
  const int world = comm::size_of(comm::world());
  auto trace = requests();
  trace.resize(2);
  trace[1].arrival = 1.5;  // the leads and their groups idle past runtime.watchdog_seconds
  config::RunConfig config = deck(world / 2, "uniform", 5, 1.0, 2);
  config.runtime.watchdog_seconds = 1.0;
  // kpipe watches every collective at runtime.watchdog_seconds (load_deck); so does this test, then lets the
  // tests after it wait as long as they need.
  comm::watch_collectives(config.runtime.watchdog_seconds, comm::rank_of(comm::world()));
  runtime::Pipeline<double> pipeline(config, comm::world(), runtime::Mode::infer);
  const runtime::ServeResult result = runtime::serve(pipeline, trace, config.inference);
  comm::watch_collectives(3600.0, comm::rank_of(comm::world()));
  if (comm::rank_of(comm::world()) != 0) return;
  REQUIRE(result.requests.size() == 2);
  for (const auto& served : result.requests) {
    CHECK(served.rejected.empty());
    CHECK(served.generated.size() == static_cast<std::size_t>(trace[served.id].max_new_tokens));
  }
}
