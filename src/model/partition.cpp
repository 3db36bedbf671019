#include "kpipe/model/partition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::model {

namespace {

std::vector<LayerRange> ranges_from_counts(const std::vector<int>& counts) {
  std::vector<LayerRange> ranges;
  int first = 0;
  for (const int count : counts) {
    ranges.push_back({first, count});
    first += count;
  }
  return ranges;
}

void check_counts(const std::vector<int>& counts, int stages, int layers) {
  if (static_cast<int>(counts.size()) != stages) {
    throw input_error(
        fmt::format("the partition has {} entries but there are {} model stages; give one layer count "
                    "per stage",
                    counts.size(), stages));
  }
  const int total = std::accumulate(counts.begin(), counts.end(), 0);
  const bool positive = std::all_of(counts.begin(), counts.end(), [](int c) { return c >= 1; });
  if (total != layers || !positive) {
    std::vector<std::string> items;
    for (const int c : counts) items.push_back(std::to_string(c));
    throw input_error(
        fmt::format("the partition [{}] must give every stage at least one layer and sum to the {} "
                    "layers of the model, but sums to {}",
                    join_choices(items, ", "), layers, total));
  }
}

// Layer counts of the split that greedily fills each stage up to `limit`
// FLOPs while leaving one layer for every later stage; empty when `limit` is
// too small for `stages` stages.
std::vector<int> greedy_counts(const std::vector<std::int64_t>& flops, int stages, std::int64_t limit) {
  const int layers = static_cast<int>(flops.size());
  std::vector<int> counts;
  int next = 0;
  for (int s = 0; s < stages; ++s) {
    const int later_stages = stages - s - 1;
    std::int64_t cost = 0;
    int count = 0;
    while (next + count < layers - later_stages && (count == 0 || cost + flops[next + count] <= limit)) {
      cost += flops[next + count];
      ++count;
    }
    if (cost > limit) return {};
    counts.push_back(count);
    next += count;
  }
  return next == layers ? counts : std::vector<int>{};
}

}  // namespace

// The smallest largest-stage cost reachable, by bisection over the cost.
std::vector<int> balanced_counts(const std::vector<std::int64_t>& costs, int stages) {
  std::int64_t low = *std::max_element(costs.begin(), costs.end());
  std::int64_t high = std::accumulate(costs.begin(), costs.end(), std::int64_t{0});
  while (low < high) {
    const std::int64_t mid = low + (high - low) / 2;
    if (greedy_counts(costs, stages, mid).empty()) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return greedy_counts(costs, stages, low);
}

namespace {

std::int64_t partitions = 0;

}  // namespace

std::int64_t partitions_computed() { return partitions; }

std::vector<LayerRange> partition_layers(const ModelSpec& model, int stages, const std::vector<int>& counts) {
  ++partitions;
  const auto layers = model.layers();
  const int layer_count = static_cast<int>(layers.size());
  if (stages < 1 || stages > layer_count) {
    throw input_error(fmt::format("{} model stages cannot split a model of {} layers; use between 1 and {} stages",
                                  stages, layer_count, layer_count));
  }
  if (!counts.empty()) {
    check_counts(counts, stages, layer_count);
    return ranges_from_counts(counts);
  }
  std::vector<std::int64_t> flops;
  for (const auto& layer : layers) flops.push_back(forward_flops(layer));
  return ranges_from_counts(balanced_counts(flops, stages));
}

std::vector<LayerRange> partition_layers(const config::RunConfig& config) {
  return partition_layers(ModelSpec::from_config(config.model), config.pipeline.model_stages(),
                          config.pipeline.partition);
}

}  // namespace kpipe::model
