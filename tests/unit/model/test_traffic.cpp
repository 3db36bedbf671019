// The communication volume per link of a model stage, against numbers worked
// out by hand from docs/model.md "Tensor parallelism": which Linears sum in F
// and B, how wide each tensor is, what each rank holds.
#include <string>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/traffic.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

config::RunConfig config_of(const std::string& text) {
  return config::run_config(config::parse_deck(text, "deck.toml"));
}

std::vector<StageTraffic> traffic_of(const config::RunConfig& config) {
  return stage_traffic(config, partition_layers(config));
}

// A transformer of vocabulary 64, T = 32, dim 64, 4 heads, 2 blocks: layers
// embedding, block, block, head, two to a stage; microbatches of 4 samples.
std::string transformer(const std::string& extra, int t = 2) {
  return "model.kind = \"transformer\"\nmodel.vocab = 64\nmodel.context = 32\nmodel.dim = 64\nmodel.heads = 4\n"
         "model.layers = 2\ntrain.global_batch = 32\ntrain.microbatch_size = 4\npipeline.stages = 2\n"
         "pipeline.partition = [2, 2]\npipeline.tensor_parallel = " +
         std::to_string(t) + "\n" + extra;
}

constexpr std::int64_t boundary = 4 * 32 * 64 * 4;  // b x T x dim floats

}  // namespace

TEST_CASE("a transformer stage's traffic per microbatch, worked out by hand", "[model][traffic]") {
  const auto stages = traffic_of(config_of(transformer("")));
  REQUIRE(stages.size() == 2);
  // Scatter/gather: half a boundary tensor each way, all-gathered on receipt.
  CHECK(stages[0].output_bytes == boundary);
  CHECK(stages[1].output_bytes == 0);
  for (const auto& stage : stages) {
    CHECK(stage.pipeline.bytes == boundary / 2);
    CHECK(stage.pipeline.calls == 1);
    CHECK(stage.boundary_gather.bytes == boundary / 2);
  }
  // Stage 0, F: the embedding's lookups, the block's attention and MLP outputs; B: the block's two input sums.
  CHECK(stages[0].tensor_forward.bytes == 3 * boundary);
  CHECK(stages[0].tensor_forward.calls == 3);
  CHECK(stages[0].tensor_backward.bytes == 2 * boundary);
  CHECK(stages[0].tensor_backward.calls == 2);
  // Stage 1, F: the block's two sums and the loss's b x T x t maxima and b x T x 2 sums; B: the block's two, the
  // head's.
  CHECK(stages[1].tensor_forward.bytes == 2 * boundary + 4 * 32 * (2 + 2) * 4);
  CHECK(stages[1].tensor_forward.calls == 4);
  CHECK(stages[1].tensor_backward.bytes == 3 * boundary);
  CHECK(stages[1].tensor_backward.calls == 3);
  // Stage 0 holds (256/2 + 32) x 64 embedding values (the vocabulary of 64 padded to a multiple of 128 · t) and a
  // block of two LayerNorms (4 x 64), QKV 64 x 192/2 + 96, projection 64/2 x 64 + 64, MLP up 64 x 256/2 + 128 and
  // down 256/2 x 64 + 64.
  CHECK(stages[0].gradient_bytes ==
        4 * ((128 + 32) * 64 + 256 + (6144 + 96) + (2048 + 64) + (8192 + 128) + (8192 + 64)));
}

TEST_CASE("without scatter/gather a boundary tensor travels whole", "[model][traffic]") {
  const auto stages = traffic_of(config_of(transformer("pipeline.scatter_gather = false\n")));
  CHECK(stages[0].pipeline.bytes == boundary);
  CHECK(stages[1].pipeline.bytes == boundary);
  CHECK(stages[0].boundary_gather.bytes == 0);
  CHECK(stages[0].boundary_gather.calls == 0);
}

TEST_CASE("recomputation repeats the layers' forward sums in B, not the loss's", "[model][traffic]") {
  const auto stages = traffic_of(config_of(transformer("pipeline.recompute = \"full\"\n")));
  CHECK(stages[0].tensor_backward.bytes == 2 * boundary + 3 * boundary);
  CHECK(stages[0].tensor_backward.calls == 5);
  CHECK(stages[1].tensor_backward.bytes == 3 * boundary + 2 * boundary);
  CHECK(stages[1].tensor_backward.calls == 5);
}

TEST_CASE("an mlp's pairs sum once each way, and its boundaries are as wide as the layer before", "[model][traffic]") {
  // Layers 10 -> 8 -> 6 -> 4 -> 3 split column, row | column, row; b = 5.
  const auto stages = traffic_of(
      config_of("model.input_dim = 10\nmodel.hidden = [8, 6, 4]\nmodel.output_dim = 3\ntrain.global_batch = 10\n"
                "train.microbatch_size = 5\npipeline.stages = 2\npipeline.partition = [2, 2]\n"
                "pipeline.tensor_parallel = 2\npipeline.scatter_gather = false\n"));
  CHECK(stages[0].output_bytes == 5 * 6 * 4);
  CHECK(stages[0].pipeline.bytes == 5 * 6 * 4);
  // Layer 0's input has no gradient, so its column split sums nothing; layer 1 sums its output.
  CHECK(stages[0].tensor_forward.bytes == 5 * 6 * 4);
  CHECK(stages[0].tensor_backward.bytes == 0);
  CHECK(stages[1].tensor_forward.bytes == 5 * 3 * 4);
  CHECK(stages[1].tensor_backward.bytes == 5 * 6 * 4);
  // Column 10 x 8/2 + 4, row 8/2 x 6 + 6.
  CHECK(stages[0].gradient_bytes == 4 * ((40 + 4) + (24 + 6)));
}

TEST_CASE("with one tensor rank a rank holds every parameter and sums nothing in its group", "[model][traffic]") {
  const config::RunConfig config = config_of(transformer("", 1));
  for (const auto& stage : traffic_of(config)) {
    CHECK(stage.tensor_forward.bytes == 0);
    CHECK(stage.tensor_backward.bytes == 0);
    CHECK(stage.pipeline.bytes == boundary);
  }
}

TEST_CASE("a rank's step: m microbatches through each of its stages, one gradient sum when d > 1", "[model][traffic]") {
  const auto stages = traffic_of(config_of(transformer("")));
  const StepTraffic step = step_traffic({&stages[0]}, 8, 2);
  CHECK(step.pipeline.bytes == 8 * boundary / 2);
  CHECK(step.pipeline.calls == 8);
  CHECK(step.tensor.bytes == 8 * (3 * boundary + 2 * boundary + boundary / 2));
  CHECK(step.tensor.calls == 8 * 6);
  CHECK(step.data.bytes == stages[0].gradient_bytes);
  CHECK(step_traffic({&stages[0]}, 8, 1).data.bytes == 0);
}
