// kpipe tune's pieces against arithmetic done by hand: layer costs shared by
// FLOPs, the partition that makes the slowest stage fastest, a candidate's
// stage costs, and which shapes the registry lets it try.
#include <algorithm>
#include <numeric>
#include <string>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/runtime/tuning/tuning.hpp"
#include "kpipe/schedule/run_plan.hpp"

using namespace kpipe;

namespace {

// Five Linear layers (each with its activation), 12 -> 16 -> 16 -> 16 -> 16 -> 5.
config::RunConfig mlp(int p, int global_batch, const std::string& extra = "") {
  return config::run_config(config::parse_deck(
      "model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16]\nmodel.output_dim = 5\ntrain.global_batch = " +
          std::to_string(global_batch) + "\ntrain.microbatch_size = 4\npipeline.stages = " + std::to_string(p) + "\n" +
          extra,
      "tune.toml"));
}

}  // namespace

TEST_CASE("balanced_counts makes the slowest stage as fast as any split can", "[tune][partition]") {
  CHECK(model::balanced_counts({1, 1, 1, 1, 4}, 2) == std::vector<int>{4, 1});
  CHECK(model::balanced_counts({3, 1, 1, 1, 3}, 3) == std::vector<int>{1, 3, 1});
  CHECK(model::balanced_counts({5, 5, 5, 5}, 4) == std::vector<int>{1, 1, 1, 1});
  // Every split of 6 layers in 3 stages, by brute force: none has a lower maximum.
  const std::vector<std::int64_t> costs = {7, 2, 9, 4, 4, 1};
  const auto counts = model::balanced_counts(costs, 3);
  const auto largest = [&](int a, int b) {
    const auto sum = [&](int from, int to) { return std::accumulate(&costs[from], &costs[to], std::int64_t{0}); };
    return std::max({sum(0, a), sum(a, a + b), sum(a + b, 6)});
  };
  std::int64_t best = 1 << 30;
  for (int a = 1; a <= 4; ++a) {
    for (int b = 1; a + b <= 5; ++b) best = std::min(best, largest(a, b));
  }
  CHECK(largest(counts[0], counts[1]) == best);
}

TEST_CASE("a stage's measured costs are shared among its layers by forward FLOPs", "[tune]") {
  const config::RunConfig config = mlp(2, 32);
  const auto model = model::ModelSpec::from_config(config.model);
  const auto ranges = model::partition_layers(config);
  REQUIRE(ranges.size() == 2);
  schedule::CostFit fit;
  fit.p = 2;
  fit.stages = {{{{1e-3, 1e-4}, {2e-3, 2e-4}, {3e-3, 3e-4}}}, {{{4e-3, 4e-4}, {5e-3, 5e-4}, {6e-3, 6e-4}}}};
  const auto layers = runtime::layer_costs(fit, model, ranges);
  REQUIRE(layers.size() == static_cast<std::size_t>(model.layer_count()));
  const auto specs = model.layers();
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    double flops = 0.0;
    for (int l = ranges[s].first; l < ranges[s].end(); ++l) flops += static_cast<double>(specs[l].flops);
    for (int k = 0; k < 3; ++k) {
      double fixed = 0.0, per_sample = 0.0;
      for (int l = ranges[s].first; l < ranges[s].end(); ++l) {
        fixed += layers[l][k].fixed;
        per_sample += layers[l][k].per_sample;
        CHECK(layers[l][k].fixed == Approx(fit.stages[s][k].fixed * specs[l].flops / flops));
      }
      CHECK(fixed == Approx(fit.stages[s][k].fixed));
      CHECK(per_sample == Approx(fit.stages[s][k].per_sample));
    }
  }
  // A deck calibrated with full recomputation measured each layer's F again inside B: its own B is the rest.
  const auto recomputed = runtime::layer_costs(fit, mlp(2, 32, "pipeline.recompute = \"full\"\n"));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    CHECK(recomputed[l][1].per_sample == Approx(layers[l][1].per_sample - layers[l][0].per_sample));
    CHECK(recomputed[l][0].per_sample == Approx(layers[l][0].per_sample));
  }
  fit.stages.pop_back();
  CHECK_THROWS_WITH(runtime::layer_costs(fit, model, ranges), Catch::Contains("measured on 1 model stages"));
}

TEST_CASE("a candidate's stages cost the sum of their layers, recomputation adding F to B", "[tune]") {
  // Four layers of F = 1, 2, 3, 4 ms per sample; B = 2 F, W = F.
  std::vector<runtime::LayerCost> layers;
  for (int l = 1; l <= 4; ++l) layers.push_back({{{0.0, 1e-3 * l}, {0.0, 2e-3 * l}, {0.0, 1e-3 * l}}});
  schedule::CostFit fit;
  fit.p = 2;
  fit.stages.assign(2, {});
  fit.runs.push_back({});
  fit.runs.back().p = 2;
  fit.runs.back().microbatch_size = 4;
  fit.runs.back().stages.assign(2, {});
  fit.sizes = {4};
  // F + B + W = 4 F per layer: 4, 8, 12, 16; the best split in two is [3, 1] (24 against 16).
  CHECK(runtime::cost_balanced_partition(layers, 4, config::Recompute::none, 2) == std::vector<int>{3, 1});
  const runtime::TuneCandidate candidate{"1f1b", 1, 4, config::Recompute::full, {3, 1}};
  const schedule::Calibration costs = runtime::candidate_calibration(fit, layers, candidate, 2);
  REQUIRE(costs.stages.size() == 2);
  CHECK(costs.stages[0].forward == Approx(4 * 6e-3));
  CHECK(costs.stages[0].backward_input == Approx(4 * 12e-3 + 4 * 6e-3));  // B and recomputation's F
  CHECK(costs.stages[1].backward_weight == Approx(4 * 4e-3));
  CHECK(costs.p == 2);
  CHECK(costs.microbatch_size == 4);
  CHECK(candidate.describe() == "1f1b v=1 b=4 recompute=full [3,1]");
  CHECK(candidate.overrides().at(5) == "pipeline.partition=[3, 1]");
  CHECK(candidate.overrides().back() == "train.distributed_optimizer=false");
}

TEST_CASE("tune tries what the registry accepts for the deck's p and B", "[tune]") {
  const config::RunConfig config = mlp(2, 8);        // B/d = 8: b in {1, 2, 4, 8}
  const auto shapes = runtime::tune_shapes(config);  // 5 layers
  const auto tried = [&](const std::string& schedule, int v, int b) {
    return std::any_of(shapes.begin(), shapes.end(),
                       [&](const runtime::TuneCandidate& c) { return c.schedule == schedule && c.v == v && c.b == b; });
  };
  CHECK(tried("1f1b", 1, 8));
  // The distributed optimizer only where there are replicas to shard over, and then beside every shape.
  const auto distributed = [](const runtime::TuneCandidate& c) { return c.distributed; };
  CHECK(std::none_of(shapes.begin(), shapes.end(), distributed));
  const auto replicated = runtime::tune_shapes(mlp(2, 16, "pipeline.data_parallel = 2\n"));
  CHECK(std::count_if(replicated.begin(), replicated.end(), distributed) * 2 ==
        static_cast<std::ptrdiff_t>(replicated.size()));
  CHECK(tried("zb-v", 2, 8));
  CHECK(tried("v-half", 2, 8));  // the memory levers of Qi et al.
  CHECK(tried("v-min", 2, 8));
  CHECK_FALSE(tried("v-min", 1, 8));
  CHECK(tried("dualpipe-v", 2, 2));         // m = 4 = 2p
  CHECK_FALSE(tried("dualpipe-v", 2, 4));   // m = 2 < 2p
  CHECK_FALSE(tried("interleaved", 4, 1));  // 8 model stages > 5 layers
  CHECK_FALSE(tried("1f1b", 2, 1));
  CHECK_FALSE(tried("forward", 1, 1));  // inference only
  CHECK(std::count_if(shapes.begin(), shapes.end(),
                      [](const runtime::TuneCandidate& c) { return c.recompute == config::Recompute::full; }) *
            2 ==
        static_cast<std::ptrdiff_t>(shapes.size()));
  // 1F1B and ZB-H1 with and without one extra warm-up forward, every other schedule without.
  for (const std::string name : {"1f1b", "zb-h1"}) {
    const auto with_extra = [&](int extra) {
      return std::count_if(shapes.begin(), shapes.end(), [&](const runtime::TuneCandidate& c) {
        return c.schedule == name && c.extra_warmup == extra;
      });
    };
    CHECK(with_extra(1) == 8);  // b in {1, 2, 4, 8}, recomputation off and on
    CHECK(with_extra(0) == with_extra(1));
  }
  CHECK(std::none_of(shapes.begin(), shapes.end(), [](const runtime::TuneCandidate& c) {
    return c.schedule != "1f1b" && c.schedule != "zb-h1" && c.extra_warmup != 0;
  }));
  runtime::TuneCandidate deeper{"1f1b", 1, 4, config::Recompute::none, {3, 2}, 1};
  CHECK(deeper.describe() == "1f1b+1 v=1 b=4 recompute=none [3,2]");
  const std::vector<std::string> overrides = deeper.overrides();
  CHECK(std::count(overrides.begin(), overrides.end(), "pipeline.extra_warmup=1") == 1);
}

TEST_CASE("a refined partition's simulated step is the best of every split", "[tune]") {
  // Five layers, the last one heavy (a loss head): F per sample 1, 1, 1, 1, 6 ms, B = 2 F, W = F.
  std::vector<runtime::LayerCost> layers;
  for (const double f : {1e-3, 1e-3, 1e-3, 1e-3, 6e-3}) layers.push_back({{{0.0, f}, {0.0, 2 * f}, {0.0, f}}});
  schedule::CostFit fit;
  fit.p = 2;
  fit.stages.assign(2, {});
  fit.sizes = {4};
  fit.runs.push_back({});
  fit.runs.back().p = 2;
  fit.runs.back().microbatch_size = 4;
  fit.runs.back().stages.assign(2, {});
  const config::RunConfig config = mlp(2, 32);
  const auto plan = schedule::run_plan(config);
  const auto schedule = schedule::make_schedule(plan);
  const auto step = [&](const std::vector<int>& counts) {
    const runtime::TuneCandidate c{"1f1b", 1, 4, config::Recompute::none, counts};
    return schedule::predict_step(schedule, runtime::candidate_calibration(fit, layers, c, 2), 0).step_seconds;
  };
  double best = 1e9;
  for (int first = 1; first <= 4; ++first) best = std::min(best, step({first, 5 - first}));
  // Start from the worst split: the search must walk the boundary to the best.
  const runtime::TuneCandidate start{"1f1b", 1, 4, config::Recompute::none, {1, 4}};
  const auto refined = runtime::refined_partition(schedule, 0, fit, layers, start, 1.0);
  CHECK(step(refined) == Approx(best));
  CHECK(step(refined) < step({1, 4}));
}

// Selective recomputation rebuilds a decoder block's attention probabilities
// in B: the scores' product, T·T·dim FLOPs per sample of the block's forward
// 2T·(3d² + d² + 2·d·4d) + 2T²·d. Its B then costs that share of its F more;
// the embedding and the head rebuild nothing, nor does the fused attention.
TEST_CASE("selective recomputation adds to B the share of F that a layer rebuilds", "[tune]") {
  const auto transformer = [](const std::string& attention) {
    return config::run_config(config::parse_deck(
        "model.kind = \"transformer\"\nmodel.vocab = 11\nmodel.context = 8\nmodel.dim = 16\nmodel.heads = 2\n"
        "model.layers = 2\nmodel.mlp_ratio = 4\ntrain.global_batch = 8\ntrain.microbatch_size = 2\n"
        "pipeline.stages = 2\ncompute.attention = \"" +
            attention + "\"\n",
        "tune.toml"));
  };
  const config::RunConfig gemm = transformer("gemm");
  const auto model = model::ModelSpec::from_config(gemm.model);
  const auto ranges = model::partition_layers(gemm);
  schedule::CostFit fit;
  fit.p = 2;
  fit.stages = {{{{1e-3, 1e-4}, {2e-3, 2e-4}, {3e-3, 3e-4}}}, {{{4e-3, 4e-4}, {5e-3, 5e-4}, {6e-3, 6e-4}}}};
  const auto layers = runtime::layer_costs(fit, model, ranges, kernels::AttentionPath::gemm);
  const auto fused = runtime::layer_costs(fit, model, ranges, kernels::AttentionPath::fused);
  const double T = 8, d = 16;
  const double block = 2 * T * (3 * d * d + d * d + 2 * d * 4 * d) + 2 * T * T * d;
  for (int l = 0; l < model.layer_count(); ++l) {
    const bool is_block = l > 0 && l + 1 < model.layer_count();
    INFO("layer " << l);
    CHECK(layers[l][3].per_sample == Approx(is_block ? layers[l][0].per_sample * T * T * d / block : 0.0));
    CHECK(fused[l][3].per_sample == 0.0);
  }
  const runtime::TuneCandidate candidate{"1f1b", 1, 2, config::Recompute::selective, {2, 2}};
  const runtime::TuneCandidate none{"1f1b", 1, 2, config::Recompute::none, {2, 2}};
  fit.runs.push_back({});
  fit.runs.back().p = 2;
  fit.runs.back().microbatch_size = 2;
  fit.runs.back().stages.assign(2, {});
  fit.sizes = {2};
  const auto selective_costs = runtime::candidate_calibration(fit, layers, candidate, 2);
  const auto none_costs = runtime::candidate_calibration(fit, layers, none, 2);
  for (int s = 0; s < 2; ++s) {
    const double rebuilt = layers[2 * s][3].at(2) + layers[2 * s + 1][3].at(2);
    CHECK(rebuilt > 0.0);
    CHECK(selective_costs.stages[s].backward_input == Approx(none_costs.stages[s].backward_input + rebuilt));
    CHECK(selective_costs.stages[s].forward == Approx(none_costs.stages[s].forward));
  }
  const auto selective_tried = [](const config::RunConfig& config) {
    const auto shapes = runtime::tune_shapes(config);
    return std::any_of(shapes.begin(), shapes.end(),
                       [](const runtime::TuneCandidate& c) { return c.recompute == config::Recompute::selective; });
  };
  CHECK(selective_tried(gemm));
  CHECK_FALSE(selective_tried(transformer("fused")));
  CHECK_FALSE(selective_tried(mlp(2, 8)));
}
