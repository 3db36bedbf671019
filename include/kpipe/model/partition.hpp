#pragma once
// Partitioning a model into p * v contiguous model stages (DESIGN.md §1):
// either the explicit layer counts of pipeline.partition, or balanced so that
// the most expensive stage costs as few forward FLOPs as possible.

#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

// Global layers [first, first + count).
struct LayerRange {
  int first = 0;
  int count = 0;
  int end() const { return first + count; }
  bool operator==(const LayerRange& other) const { return first == other.first && count == other.count; }
};

// `stages` ranges that cover every layer in order. With `counts`, stage s gets
// counts[s] layers; otherwise the split minimises the largest stage's FLOPs
// (ties: earlier stages take more layers). Bad counts or more stages than
// layers are input errors that print the numbers.
std::vector<LayerRange> partition_layers(const ModelSpec& model, int stages, const std::vector<int>& counts = {});

// Layer counts of the `stages` contiguous stages whose largest summed cost is
// the smallest possible (ties: earlier stages take more layers); `costs` per
// layer, in any unit (FLOPs, nanoseconds). Precondition: 1 <= stages <= layers.
std::vector<int> balanced_counts(const std::vector<std::int64_t>& costs, int stages);

// The partition of a run: p * v stages, pipeline.partition when given.
std::vector<LayerRange> partition_layers(const config::RunConfig& config);

// Partitions computed so far in this process: a run computes its partition
// once (TrainerSpec::from_config), and `kpipe run --json` reports this count
// so a test can hold it to that.
std::int64_t partitions_computed();

}  // namespace kpipe::model
