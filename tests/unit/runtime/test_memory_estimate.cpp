// The memory estimate against what the built objects really hold: the
// parameters and optimizer state of a rank's chunks, and the peak of stashed
// activations when the rank's action list drives real stages.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "random_matrix.hpp"

using namespace kpipe;

namespace {

config::RunConfig config_of(const std::string& schedule, const std::string& kind, const std::string& optimizer,
                            const std::string& recompute) {
  const std::string hidden = kind == "mlp" ? "[24, 16, 32, 16, 8]" : "[16, 16, 16, 16, 16]";
  return config::run_config(config::parse_deck(
      fmt::format("model.kind = \"{}\"\nmodel.input_dim = 12\nmodel.hidden = {}\nmodel.output_dim = 5\n"
                  "train.global_batch = 32\ntrain.microbatch_size = 4\ntrain.optimizer = \"{}\"\n"
                  "pipeline.stages = 2\npipeline.schedule = \"{}\"\npipeline.virtual_stages = {}\n"
                  "pipeline.recompute = \"{}\"\n",
                  kind, hidden, optimizer, schedule, schedule == "zb-v" ? 2 : 1, recompute),
      "test.toml"));
}

std::int64_t bytes_of(const std::vector<model::Parameter<float>>& parameters) {
  std::int64_t total = 0;
  for (const auto& p : parameters) total += static_cast<std::int64_t>(p.value.span() * sizeof(float));
  return total;
}

}  // namespace

TEST_CASE("the memory estimate matches the rank's built chunks and its stash", "[runtime][memory]") {
  const std::string schedule_name = GENERATE("gpipe", "1f1b", "zb-h1", "zb-v");
  const std::string kind = GENERATE("mlp", "residual_mlp");
  const std::string optimizer = GENERATE("sgd", "adamw");
  const std::string recompute = GENERATE("none", "full");
  const config::RunConfig config = config_of(schedule_name, kind, optimizer, recompute);
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const schedule::Schedule schedule = schedule::make_schedule(schedule::run_plan(config));
  for (int rank = 0; rank < schedule.p; ++rank) {
    INFO(fmt::format("{} {} {} recompute {} rank {}", schedule_name, kind, optimizer, recompute, rank));
    const runtime::MemoryEstimate estimate = runtime::estimate_memory(spec, schedule, rank, 1, false, 0);
    tensor::ExecContext exec;
    std::vector<std::unique_ptr<model::Stage<float>>> chunks;
    for (int c = 0; c < schedule.v; ++c) {
      chunks.push_back(std::make_unique<model::Stage<float>>(
          spec.model, spec.stages.at(schedule.placement.stage(rank, c)), spec.stage, exec));
    }
    const auto parameters = model::parameters_of(chunks);
    CHECK(estimate.parameters == bytes_of(parameters));
    CHECK(estimate.gradients == estimate.parameters);
    const model::Optimizer<float> optimizer_state(spec.optimizer, parameters, exec);
    std::int64_t state_bytes = 0;
    for (const auto& state : optimizer_state.state()) state_bytes += static_cast<std::int64_t>(state.value.span() * 4);
    CHECK(estimate.optimizer_state == state_bytes);

    // Drive the chunks through the rank's actions; the peak they stash is the truth.
    std::size_t peak = 0;
    for (const schedule::Action& a : schedule.ranks[rank]) {
      if (!schedule::is_compute(a.kind)) continue;
      model::Stage<float>& stage = *chunks[a.chunk];
      const int b = spec.microbatch_size;
      const auto dX = tensor::uninitialized_matrix<float>("dX", b, stage.input_dim());
      if (a.kind == schedule::ActionKind::forward) {
        const auto Y = tensor::uninitialized_matrix<float>("Y", b, stage.output_dim());
        stage.forward(a.microbatch, test::random_matrix<float>(b, stage.input_dim(), 1), Y);
      } else if (a.kind == schedule::ActionKind::backward) {
        stage.backward(a.microbatch, test::random_matrix<float>(b, stage.output_dim(), 2), dX);
      } else if (a.kind == schedule::ActionKind::backward_input) {
        stage.backward_input(a.microbatch, test::random_matrix<float>(b, stage.output_dim(), 2), dX);
      } else if (a.kind == schedule::ActionKind::backward_weight) {
        stage.backward_weight(a.microbatch);
      }
      std::size_t held = 0;
      for (const auto& chunk : chunks) held += chunk->stashed_bytes();
      peak = std::max(peak, held);
    }
    // Recomputation rebuilds a microbatch's saved tensors inside B for a
    // moment, which only the stages' own peaks see. The estimate may be above
    // (it counts the first layer's gradient input, which stage 0 never makes),
    // never below.
    std::size_t chunk_peaks = 0;
    for (const auto& chunk : chunks) chunk_peaks += chunk->peak_stashed_bytes();
    const auto truth = static_cast<std::int64_t>(std::max(peak, chunk_peaks));
    CHECK(estimate.activations >= static_cast<std::int64_t>(peak));
    CHECK(estimate.activations <= truth * 4 / 3);
  }
}

TEST_CASE("with packed weights the estimate counts a copy of W, and of Wᵀ in training", "[runtime][memory]") {
  const std::string kind = GENERATE("mlp", "residual_mlp");
  config::RunConfig config = config_of("1f1b", kind, "adamw", "none");
  config.compute.gemm = config::GemmKind::packed;
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const schedule::Schedule schedule = schedule::make_schedule(schedule::run_plan(config));
  tensor::ExecContext exec;
  for (int rank = 0; rank < schedule.p; ++rank) {
    const model::Stage<float> stage(spec.model, spec.stages.at(rank), spec.stage, exec);
    // The Linear weights, the only parameters named "<layer>.weight".
    std::int64_t weights = 0;
    for (const auto& p : stage.parameters()) {
      if (p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".weight") == 0) {
        weights += static_cast<std::int64_t>(p.value.span() * sizeof(float));
      }
    }
    const runtime::MemoryEstimate estimate = runtime::estimate_memory(spec, schedule, rank, 1, false, 0);
    INFO(kind << " rank " << rank);
    CHECK(weights > 0);
    CHECK(estimate.packed_weights == (kernels::packed_gemm_available<float>() ? 2 * weights : 0));
  }
}

// A decoder block's F passes 16 activations of d per position between its
// parts (LayerNorm d, Q|K|V 3d, attention d, projection d; LayerNorm d, the
// MLP's 4d and its activation's 4d, projection d), which the pool keeps, and
// in training B as many gradients.
TEST_CASE(
    "the estimate counts one action's temporaries: the GEMM attention's T x T probabilities and a "
    "block's activations between its parts",
    "[runtime][memory]") {
  const std::string attention = GENERATE("gemm", "fused");
  const std::string schedule_name = GENERATE("1f1b", "forward");
  const int b = 2, context = 32, heads = 4, dim = 16;
  const config::RunConfig config = config::run_config(config::parse_deck(
      fmt::format("model.kind = \"transformer\"\nmodel.vocab = 16\nmodel.context = {}\nmodel.dim = {}\n"
                  "model.heads = {}\nmodel.layers = 2\ntrain.global_batch = 8\ntrain.microbatch_size = {}\n"
                  "pipeline.stages = 2\npipeline.schedule = \"{}\"\ncompute.attention = \"{}\"\n",
                  context, dim, heads, b, schedule_name, attention),
      "test.toml"));
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  const schedule::Schedule schedule = schedule::make_schedule(schedule::run_plan(config));
  INFO(attention << " " << schedule_name);
  for (int rank = 0; rank < schedule.p; ++rank) {
    const runtime::MemoryEstimate estimate = runtime::estimate_memory(spec, schedule, rank, 1, false, 0);
    // b sequences, each head's causal scores over T x T positions, float32; inference stashes nothing.
    const std::int64_t probabilities = std::int64_t{b} * heads * context * context * 4;
    const std::int64_t between = 16 * std::int64_t{dim} * b * context * 4 * (schedule_name == "forward" ? 1 : 2);
    CHECK(estimate.workspace == (attention == "gemm" ? probabilities : 0) + between);
    if (schedule_name == "forward") CHECK(estimate.activations == 0);
    CHECK(estimate.total() >= estimate.parameters + estimate.workspace);
  }
}

// Selective recomputation: each stashed microbatch of a rank keeps no T x T
// probabilities of its blocks (at most that many fewer bytes at the peak),
// and B rebuilds one block's beside their gradient.
TEST_CASE("selective recomputation stashes no probabilities and rebuilds one block's in B", "[runtime][memory]") {
  const int b = 2, context = 32, heads = 4, dim = 16;
  const auto estimates = [&](const std::string& recompute) {
    const config::RunConfig config = config::run_config(config::parse_deck(
        fmt::format("model.kind = \"transformer\"\nmodel.vocab = 16\nmodel.context = {}\nmodel.dim = {}\n"
                    "model.heads = {}\nmodel.layers = 4\ntrain.global_batch = 8\ntrain.microbatch_size = {}\n"
                    "pipeline.stages = 2\npipeline.recompute = \"{}\"\n",
                    context, dim, heads, b, recompute),
        "test.toml"));
    const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
    const schedule::Schedule schedule = schedule::make_schedule(schedule::run_plan(config));
    std::vector<std::pair<runtime::MemoryEstimate, std::int64_t>> ranks;  // and each rank's peak stash
    for (int rank = 0; rank < schedule.p; ++rank) {
      ranks.emplace_back(runtime::estimate_memory(spec, schedule, rank, 1, false, 0),
                         schedule::peak_stash(schedule.ranks[rank]).peak);
    }
    return std::make_pair(ranks, spec.stages);
  };
  const auto [none, stages] = estimates("none");
  const auto selective = estimates("selective").first;
  const std::int64_t probabilities = std::int64_t{b} * heads * context * context * 4;
  const int layers = stages.back().end();
  for (std::size_t rank = 0; rank < none.size(); ++rank) {
    int blocks = 0;  // every layer but the embedding and the head
    for (int l = stages[rank].first; l < stages[rank].end(); ++l) blocks += l > 0 && l + 1 < layers;
    INFO("rank " << rank << " blocks " << blocks);
    REQUIRE(blocks > 0);
    // The peak may come at a BW, where what B keeps for W replaces one stash:
    // with one microbatch stashed (the last rank) that is all of the peak.
    const std::int64_t saved = none[rank].first.activations - selective[rank].first.activations;
    CHECK(saved >= (none[rank].second > 1 ? (none[rank].second - 1) * blocks * probabilities : 0));
    CHECK(saved <= none[rank].second * blocks * probabilities);
    CHECK(selective[rank].first.workspace - none[rank].first.workspace == probabilities);
  }
}

TEST_CASE("the cgroup limit is the smallest limit from the process's cgroup to the root, v2 or v1",
          "[runtime][memory]") {
  const auto root = std::filesystem::temp_directory_path() / fmt::format("kpipe-cgroup-{}", ::getpid());
  std::filesystem::create_directories(root / "sys/job/step");
  const auto write = [](const std::filesystem::path& file, const std::string& text) { std::ofstream(file) << text; };
  write(root / "cgroup", "0::/job/step\n");
  write(root / "sys/memory.max", "max\n");
  write(root / "sys/job/memory.max", "1073741824\n");
  write(root / "sys/job/step/memory.max", "max\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 1073741824);
  write(root / "sys/job/step/memory.max", "536870912\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 536870912);
  // cgroup v1: memory.limit_in_bytes in the memory hierarchy; 2^63 - 4096 is v1's "no limit".
  std::filesystem::create_directories(root / "sys/memory/job/step");
  write(root / "cgroup", "12:cpuset:/job\n11:blkio,memory:/job/step\n");
  write(root / "sys/memory/memory.limit_in_bytes", "9223372036854771712\n");
  write(root / "sys/memory/job/step/memory.limit_in_bytes", "9223372036854771712\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 0);
  write(root / "sys/memory/job/memory.limit_in_bytes", "268435456\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 268435456);
  // Both hierarchies (a hybrid mount): the smaller limit holds.
  write(root / "cgroup", "11:memory:/job/step\n0::/job/step\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 268435456);
  write(root / "sys/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 536870912);
  write(root / "cgroup", "12:cpuset:/job\n");  // no memory controller at all
  CHECK(runtime::cgroup_memory_limit((root / "cgroup").string(), (root / "sys").string()) == 0);
  std::filesystem::remove_all(root);
}
