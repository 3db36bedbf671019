#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"

using namespace kpipe;

namespace {
config::RunConfig shape_of(const std::string& text, std::vector<std::string>* warnings = nullptr) {
  return config::run_config(config::parse_deck(text, "deck.toml"), warnings);
}
std::string error_of(const std::string& text) {
  try {
    shape_of(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("m = B / (b * d) and world size p * d", "[config]") {
  const auto s = shape_of(
      "train.global_batch = 512\ntrain.microbatch_size = 8\npipeline.data_parallel = 4\n"
      "pipeline.stages = 2\n");
  CHECK(s.pipeline.microbatches == 16);
  CHECK(s.pipeline.world_size() == 8);
  CHECK(s.layers == 5);
}

TEST_CASE("layer counts follow the model kind", "[config]") {
  CHECK(shape_of("model.hidden = [4, 4, 4]\n").layers == 4);
  CHECK(shape_of("model.hidden = []\npipeline.stages = 1\n").layers == 1);
  CHECK(shape_of("model.kind = \"residual_mlp\"\nmodel.hidden = [8, 8, 8]\n").layers == 5);
}

TEST_CASE("a batch that does not divide suggests the nearest valid microbatch size", "[config]") {
  // Divisors of 250 are 1 2 5 10 25 50 125 250: 10 is nearest to 16.
  CHECK(error_of("train.global_batch = 250\ntrain.microbatch_size = 16\n") ==
        "m = B / (b * d) = 250 / (16 * 1) is not an integer; the nearest valid train.microbatch_size is 10");
  // With d = 2 each replica gets 120 samples; 12 is the divisor of 120 nearest to 13.
  CHECK(error_of("train.global_batch = 240\ntrain.microbatch_size = 13\npipeline.data_parallel = 2\n")
            .find("nearest valid train.microbatch_size is 12") != std::string::npos);
}

TEST_CASE("train.microbatch_size = auto stands for the largest b leaving each stage a microbatch", "[config]") {
  // B/d = 96, p·v = 2·2 = 4: b = 24 gives m = 4; b = 32 would give 3.
  const std::string deck =
      "train.global_batch = 192\npipeline.data_parallel = 2\npipeline.stages = 2\npipeline.virtual_stages = 2\n"
      "pipeline.schedule = \"interleaved\"\nmodel.hidden = [8, 8, 8, 8, 8, 8, 8]\n";
  const auto automatic = shape_of(deck + "train.microbatch_size = \"auto\"\n");
  CHECK(automatic.train.microbatch_size_auto);
  CHECK(automatic.train.microbatch_size == 24);
  CHECK(automatic.pipeline.microbatches == 4);
  // The same on the command line, unquoted; a number still is a number.
  const auto overridden = config::run_config(config::parse_deck(deck, "deck.toml", {"train.microbatch_size=auto"}));
  CHECK(overridden.train.microbatch_size_auto);
  CHECK(overridden.train.microbatch_size == 24);
  const auto number = shape_of(deck + "train.microbatch_size = 8\n");
  CHECK_FALSE(number.train.microbatch_size_auto);
  CHECK(number.train.microbatch_size == 8);
  CHECK(error_of(deck + "train.microbatch_size = \"fast\"\n")
            .rfind("deck.toml:7: train.microbatch_size = \"fast\" is not valid: must be >= 1 and <= 1073741824, or "
                   "\"auto\"",
                   0) == 0);
}

TEST_CASE("cross-key rules reject inconsistent decks", "[config]") {
  CHECK(error_of("pipeline.virtual_stages = 2\n").find("needs pipeline.schedule = \"interleaved\"") !=
        std::string::npos);
  CHECK(error_of("pipeline.stages = 6\n").find("6 model stages, but the model has only 5 layers") != std::string::npos);
  CHECK(error_of("pipeline.partition = [4, 4]\n").find("sums to 8 layers, but the model has 5") != std::string::npos);
  CHECK(error_of("model.loss = \"mse\"\n").find("does not fit") != std::string::npos);
  CHECK(error_of("pipeline.schedule = \"interleaved\"\npipeline.virtual_stages = 2\nmodel.hidden = [4,4,4,4,4,4,4]\n"
                 "pipeline.stages = 4\ntrain.global_batch = 48\n")
            .find("m = 3 microbatches < p = 4 stages") != std::string::npos);
  CHECK(error_of("pipeline.partition = [2, 3]\n").empty());
}

TEST_CASE("GPipe with m < 4p warns but is valid", "[config]") {
  std::vector<std::string> warnings;
  shape_of("pipeline.schedule = \"gpipe\"\ntrain.global_batch = 64\n", &warnings);  // m = 4 < 8
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("m = 4 < 4p = 8") != std::string::npos);
  warnings.clear();
  shape_of("pipeline.schedule = \"gpipe\"\n", &warnings);  // m = 16
  CHECK(warnings.empty());
}

TEST_CASE("pipeline.extra_warmup under a schedule that does not take it warns and is dropped", "[config]") {
  std::vector<std::string> warnings;
  CHECK(shape_of("pipeline.extra_warmup = 2\n", &warnings).pipeline.extra_warmup == 2);  // 1f1b takes it
  CHECK(warnings.empty());
  const auto zb = shape_of("pipeline.extra_warmup = 2\npipeline.schedule = \"zb-h2\"\n", &warnings);
  CHECK(zb.pipeline.extra_warmup == 0);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "pipeline.extra_warmup = 2 (deck.toml:1) does nothing under pipeline.schedule = \"zb-h2\" (deck.toml:2): the "
        "schedules that take it are 1f1b, zb-h1");
  warnings.clear();
  const auto file = shape_of("pipeline.extra_warmup = 1\npipeline.schedule_file = \"mine.txt\"\n", &warnings);
  CHECK(file.pipeline.extra_warmup == 0);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("does nothing: pipeline.schedule_file = \"mine.txt\" (deck.toml:2) runs as written") !=
        std::string::npos);
}

TEST_CASE("every deck value arrives typed in the run configuration", "[config]") {
  const auto c = shape_of(
      "model.kind = \"residual_mlp\"\nmodel.hidden = [8, 8]\nmodel.activation = \"tanh\"\nmodel.loss = \"mse\"\n"
      "data.task = \"regression\"\ndata.seed = 7\ntrain.optimizer = \"sgd\"\ntrain.lr = 0.25\ntrain.grad_clip = 2.0\n"
      "train.steps = 3\npipeline.recompute = \"full\"\npipeline.partition = [2, 2]\ncompute.gemm = \"portable\"\n"
      "sim.cost_forward = 2.5\nsim.max_in_flight = 4\nruntime.watchdog_seconds = 9\n");
  CHECK(c.model.kind == "residual_mlp");
  CHECK(c.model.hidden == std::vector<int>{8, 8});
  CHECK(c.model.activation == config::ActivationKind::tanh);
  CHECK(c.model.loss == config::LossKind::mse);
  CHECK(c.data.task == config::Task::regression);
  CHECK(c.data.seed == 7);
  CHECK(c.optimizer.kind == config::OptimizerKind::sgd);
  CHECK(c.optimizer.lr == 0.25);
  CHECK(c.optimizer.grad_clip == 2.0);
  CHECK(c.train.steps == 3);
  CHECK(c.pipeline.recompute == config::Recompute::full);
  CHECK(c.pipeline.partition == std::vector<int>{2, 2});
  CHECK(c.compute.gemm == config::GemmKind::portable);
  CHECK(c.sim.cost_forward == 2.5);
  CHECK(c.sim.max_in_flight == 4);
  CHECK(c.runtime.watchdog_seconds == 9.0);
  CHECK(c.layers == 4);
}

TEST_CASE("inference keys arrive typed, and uniform batching needs a budget for every running decode", "[config]") {
  const auto defaults = shape_of("train.steps = 1\n");
  CHECK(defaults.inference.batching == config::Batching::uniform);
  CHECK(defaults.inference.token_budget == 64);
  CHECK(defaults.inference.max_sequences == 16);
  CHECK(defaults.inference.kv_cache_mib == 64.0);
  CHECK(defaults.inference.block_tokens == 16);
  CHECK(defaults.inference.temperature == 0.0);
  const auto c = shape_of(
      "inference.batching = \"request\"\ninference.token_budget = 8\ninference.max_sequences = 32\n"
      "inference.kv_cache_mib = 0.5\ninference.block_tokens = 4\ninference.temperature = 0.7\ninference.seed = 9\n");
  CHECK(c.inference.batching == config::Batching::request);
  CHECK(c.inference.token_budget == 8);
  CHECK(c.inference.max_sequences == 32);  // request batching has no token budget
  CHECK(c.inference.kv_cache_mib == 0.5);
  CHECK(c.inference.block_tokens == 4);
  CHECK(c.inference.temperature == 0.7);
  CHECK(c.inference.seed == 9);
  CHECK(error_of("inference.token_budget = 8\ninference.max_sequences = 9\n") ==
        "inference.max_sequences = 9 (deck.toml:2) exceeds inference.token_budget = 8 (deck.toml:1): a uniform "
        "microbatch must hold one decode of every running request; raise inference.token_budget to at least 9 or "
        "lower inference.max_sequences");
}
