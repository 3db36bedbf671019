// Utilisation figures against hand arithmetic: an MLP's training FLOPs are
// 3 x its Linears' 2·in·out per sample; one more decoder block adds its
// projections' and causal attention's T·(2·(3d² + d² + 2·d·h) + 2·T·d) per
// sequence, tripled; and the rates are those FLOPs times B over the step.
#include <string>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/runtime/measurement/throughput.hpp"

using namespace kpipe;

namespace {

model::ModelSpec model_of(const std::string& keys) {
  return model::ModelSpec::from_config(config::run_config(config::parse_deck(keys, "test.toml")).model);
}

std::string transformer(int layers) {
  return "model.kind = \"transformer\"\nmodel.vocab = 32\nmodel.context = 16\nmodel.dim = 24\nmodel.heads = 3\n"
         "model.mlp_ratio = 4\nmodel.layers = " +
         std::to_string(layers) + "\n";
}

}  // namespace

TEST_CASE("a training step's model FLOPs are 3 x the layers' forward FLOPs", "[runtime][throughput]") {
  const auto mlp = model_of("model.input_dim = 12\nmodel.hidden = [16, 8]\nmodel.output_dim = 5\n");
  CHECK(model::training_flops_per_sample(mlp) == 3 * 2 * (12 * 16 + 16 * 8 + 8 * 5));
  const std::int64_t T = 16, d = 24, h = 4 * 24;
  const std::int64_t block = T * (2 * (3 * d * d + d * d + 2 * d * h) + 2 * T * d);
  CHECK(model::training_flops_per_sample(model_of(transformer(3))) -
            model::training_flops_per_sample(model_of(transformer(2))) ==
        3 * block);
}

TEST_CASE("throughput is the step's model FLOPs over its seconds, per rank and of the reference",
          "[runtime][throughput]") {
  const auto mlp = model_of("model.input_dim = 12\nmodel.hidden = [16, 8]\nmodel.output_dim = 5\n");
  const double flops = 3.0 * 2 * (12 * 16 + 16 * 8 + 8 * 5) * 64;  // B = 64
  const runtime::Throughput t = runtime::throughput(mlp, 64, 4, 0.5, {2e-4, "runtime.peak_gflops"});
  CHECK(t.flops_per_step == flops);
  CHECK(t.gflops == Approx(flops / 0.5 / 1e9));
  CHECK(t.gflops_per_rank == Approx(flops / 0.5 / 1e9 / 4));
  CHECK(t.utilisation == Approx(flops / 0.5 / 1e9 / 4 / 2e-4));
  CHECK(t.to_json()["gflops_per_second"] == t.gflops);
  CHECK(t.to_json()["reference"] == "runtime.peak_gflops");
  CHECK(t.describe().find("of runtime.peak_gflops (0.0002 GFLOP/s)") != std::string::npos);
}

TEST_CASE("the reference rate is the deck's, or this thread's sgemm rate measured", "[runtime][throughput]") {
  config::RunConfig config = config::run_config(config::parse_deck("train.steps = 1\n", "test.toml"));
  config.runtime.peak_gflops = 123.0;
  CHECK(runtime::reference_rate(config).gflops == 123.0);
  CHECK(runtime::reference_rate(config).source == "runtime.peak_gflops");
  config.runtime.peak_gflops = 0.0;
  const runtime::ReferenceRate measured = runtime::reference_rate(config);
  CHECK(measured.source == "one thread's 1024³ sgemm here");
  // A 2 GFLOP product: any machine that runs this suite takes well under a minute and more than a nanosecond.
  CHECK(measured.gflops > 0.03);
  CHECK(measured.gflops < 2e6);
}
