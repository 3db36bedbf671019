// train.distributed_optimizer (ZeRO stage 1) on p = 2 pipeline ranks of d = 2
// replicas: bitwise the sequential reference (which updates every row on one
// rank) for SGD and AdamW with clipping, under 1F1B, interleaving and ZB-V,
// in bf16, post-validated, and on a transformer with tied embeddings; each
// rank keeps half the optimizer state (to a row), as the memory estimate
// says, and gathers its parameters' bytes once a step, as the traffic
// prediction says.
#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "bitwise_parameters.hpp"
#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/tuning/traffic_report.hpp"
#include "schedule_chunks.hpp"

using namespace kpipe;

namespace {

constexpr int steps = 4;

std::string model_keys(const std::string& kind) {
  if (kind == "tied") {
    return "model.kind = \"transformer\"\nmodel.vocab = 11\nmodel.context = 8\nmodel.dim = 16\nmodel.heads = 2\n"
           "model.layers = 6\nmodel.mlp_ratio = 2\nmodel.head_bias = false\nmodel.tie_embeddings = true\n";
  }
  return "model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16, 16, 16, 16]\nmodel.output_dim = 5\n";
}

// p = 2, d = 2, the optimizer distributed; clipping tight enough to act every step.
config::RunConfig config_for(const std::string& kind, const std::string& schedule, const std::string& extra = "") {
  const std::string text = fmt::format(
      "{}train.global_batch = 32\ntrain.microbatch_size = 2\ntrain.steps = {}\ntrain.grad_clip = 0.05\n"
      "train.weight_decay = 0.1\npipeline.stages = 2\npipeline.data_parallel = 2\npipeline.schedule = \"{}\"\n"
      "pipeline.virtual_stages = {}\ntrain.distributed_optimizer = true\nruntime.watchdog_seconds = 60\n{}",
      model_keys(kind), steps, schedule, test::chunks_for(schedule), extra);
  return config::run_config(config::parse_deck(text, "test.toml"));
}

std::int64_t elements(const model::Optimizer<float>& optimizer) {
  std::int64_t sum = 0;
  for (const auto& state : optimizer.state()) sum += static_cast<std::int64_t>(state.value.size());
  return sum;
}

}  // namespace

TEST_CASE("a distributed optimizer is bitwise the sequential reference", "[runtime][distributed_optimizer][np4]") {
  REQUIRE(comm::size_of(comm::world()) == 4);
  for (const auto& [kind, schedule, extra] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"mlp", "1f1b", "train.optimizer = \"sgd\"\n"},
           {"mlp", "1f1b", ""},
           {"mlp", "interleaved", ""},
           {"mlp", "zb-v", ""},
           {"mlp", "1f1b", "compute.precision = \"bf16\"\n"},
           // The clip factor changes from step to step: guesses roll back and redo.
           {"mlp", "1f1b", "train.post_validation = true\n"},
           {"tied", "1f1b", ""},
           {"tied", "zb-v", "compute.attention = \"fused\"\n"}}) {
    const config::RunConfig config = config_for(kind, schedule, extra);
    runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
    for (int step = 0; step < steps; ++step) pipeline.run_step(step);
    pipeline.settle();  // the last post-validated update
    tensor::ExecContext exec;
    model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
    for (int step = 0; step < steps; ++step) reference.step();
    INFO(fmt::format("{} {} {}stage {} replica {}", kind, schedule, extra, pipeline.grid().pipeline_rank(),
                     pipeline.grid().replica()));
    test::check_bitwise(reference.parameters(), pipeline.parameters());
    if (extra.find("post_validation") != std::string::npos) CHECK(pipeline.update()->redone() > 0);

    // Half the state of this rank's parameters, to a row of the widest.
    std::int64_t parameters = 0, widest = 0;
    for (const auto& p : pipeline.parameters()) {
      parameters += static_cast<std::int64_t>(p.value.size());
      widest = std::max<std::int64_t>(widest, p.value.extent_int(1));
    }
    const std::int64_t moments = extra.find("sgd") != std::string::npos ? 1 : 2;
    const std::int64_t mine = elements(*pipeline.optimizer());
    CHECK(std::abs(2 * mine - moments * parameters) <= 2 * moments * widest);
    CHECK(pipeline.memory().optimizer_state == moments * parameters * 4 / 2);
    // Every parameter's bytes gathered once a step (and again per roll-back and redo).
    if (extra.empty()) {
      CHECK(pipeline.shard_gather()->bytes_gathered() == static_cast<std::uint64_t>(steps * parameters * 4));
      const auto predicted = runtime::predicted_traffic(pipeline.traffic(), pipeline.schedule(), 2);
      CHECK(predicted[pipeline.grid().pipeline_rank()].data.bytes ==
            static_cast<std::int64_t>(pipeline.gradient_sync().bytes_summed() / steps + parameters * 4));
    }
  }
}
