#include "kpipe/config/shape.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <numeric>

#include "kpipe/core/error.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::config {

namespace {

// The divisor of n closest to b (ties go to the smaller one).
std::int64_t nearest_divisor(std::int64_t n, std::int64_t b) {
  std::int64_t best = 1;
  for (std::int64_t k = 1; k * k <= n; ++k) {
    if (n % k != 0) continue;
    for (const std::int64_t candidate : {k, n / k}) {
      const auto better = std::llabs(candidate - b) < std::llabs(best - b) ||
                          (std::llabs(candidate - b) == std::llabs(best - b) && candidate < best);
      if (better) best = candidate;
    }
  }
  return best;
}

int microbatch_count(const Deck& deck) {
  const std::int64_t B = deck.integer("train.global_batch");
  const std::int64_t b = deck.integer("train.microbatch_size");
  const std::int64_t d = deck.integer("pipeline.data_parallel");
  if (B % d != 0) {
    throw input_error(fmt::format("train.global_batch = {} is not divisible by pipeline.data_parallel = {}; "
                                  "set train.global_batch to a multiple of {} (e.g. {})",
                                  B, d, d, (B / d + 1) * d));
  }
  if (B % (b * d) != 0) {
    throw input_error(fmt::format("m = B / (b * d) = {} / ({} * {}) is not an integer; the nearest valid "
                                  "train.microbatch_size is {}",
                                  B, b, d, nearest_divisor(B / d, b)));
  }
  return static_cast<int>(B / (b * d));
}

void check_partition(const Deck& deck, const PipelineShape& shape) {
  const IntegerList& partition = deck.integers("pipeline.partition");
  if (partition.empty()) return;
  if (static_cast<int>(partition.size()) != shape.model_stages()) {
    throw input_error(fmt::format("{} has {} entries, but p * v = {} * {} = {} model stages need one entry each",
                                  deck.describe("pipeline.partition"), partition.size(), shape.stages,
                                  shape.virtual_stages, shape.model_stages()));
  }
  const auto total = std::accumulate(partition.begin(), partition.end(), std::int64_t{0});
  if (total != shape.layers) {
    throw input_error(fmt::format("{} sums to {} layers, but the model has {}; the entries must add up to {}",
                                  deck.describe("pipeline.partition"), total, shape.layers, shape.layers));
  }
}

}  // namespace

int model_layer_count(const Deck& deck) {
  const auto& hidden = deck.integers("model.hidden");
  const int blocks = static_cast<int>(hidden.size());
  if (deck.string("model.kind") == "mlp") return blocks + 1;
  if (hidden.empty()) {
    throw input_error(fmt::format("{}: a residual_mlp needs at least one hidden width", deck.describe("model.hidden")));
  }
  for (const auto width : hidden) {
    if (width != hidden.front()) {
      throw input_error(fmt::format("{}: residual_mlp blocks add their input to their output, so every hidden width "
                                    "must be the same (e.g. [{}, {}])",
                                    deck.describe("model.hidden"), hidden.front(), hidden.front()));
    }
  }
  return blocks + 2;
}

PipelineShape pipeline_shape(const Deck& deck, std::vector<std::string>* warnings) {
  PipelineShape shape;
  shape.stages = static_cast<int>(deck.integer("pipeline.stages"));
  shape.virtual_stages = static_cast<int>(deck.integer("pipeline.virtual_stages"));
  shape.data_parallel = static_cast<int>(deck.integer("pipeline.data_parallel"));
  shape.global_batch = static_cast<int>(deck.integer("train.global_batch"));
  shape.microbatch_size = static_cast<int>(deck.integer("train.microbatch_size"));
  shape.schedule = deck.string("pipeline.schedule");
  shape.layers = model_layer_count(deck);
  shape.microbatches = microbatch_count(deck);

  // The schedule's own rules (registry.hpp), in deck keys.
  schedule::ShapeCheck check{shape.stages,          shape.virtual_stages, shape.microbatches,
                             shape.microbatch_size, shape.data_parallel,  deck.describe("pipeline.virtual_stages")};
  schedule::check_shape(shape.schedule, check);
  if (shape.model_stages() > shape.layers) {
    throw input_error(fmt::format("p * v = {} * {} = {} model stages, but the model has only {} layers; use at most {} "
                                  "stages or add widths to model.hidden",
                                  shape.stages, shape.virtual_stages, shape.model_stages(), shape.layers,
                                  shape.layers / shape.virtual_stages));
  }
  const std::string& loss = deck.string("model.loss");
  const std::string& task = deck.string("data.task");
  if ((task == "classification") != (loss == "cross_entropy")) {
    throw input_error(fmt::format("{} does not fit {}; classification uses \"cross_entropy\", regression \"mse\"",
                                  deck.describe("model.loss"), deck.describe("data.task")));
  }
  check_partition(deck, shape);

  if (warnings && shape.schedule == "gpipe" && shape.microbatches < 4 * shape.stages) {
    warnings->push_back(fmt::format("GPipe with m = {} < 4p = {} microbatches leaves a large bubble ({:.0f}% of the "
                                    "step idle); use more microbatches or 1f1b",
                                    shape.microbatches, 4 * shape.stages,
                                    100.0 * (shape.stages - 1) / (shape.microbatches + shape.stages - 1)));
  }
  return shape;
}

}  // namespace kpipe::config
