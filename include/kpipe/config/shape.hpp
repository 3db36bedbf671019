#pragma once
// The values derived from a deck (DESIGN.md §1): microbatch count, world size,
// model stages. Computing them validates the deck as a whole.

#include <string>
#include <vector>

#include "kpipe/config/deck.hpp"

namespace kpipe::config {

struct PipelineShape {
  int stages = 1;          // p
  int virtual_stages = 1;  // v
  int data_parallel = 1;   // d
  int global_batch = 1;    // B
  int microbatch_size = 1; // b
  int microbatches = 1;    // m = B / (b * d)
  int layers = 1;          // partitionable model layers
  std::string schedule;

  int world_size() const { return stages * data_parallel; }
  int model_stages() const { return stages * virtual_stages; }
};

// Partitionable layers of the deck's model: mlp has one Linear layer per hidden
// width plus the output layer; residual_mlp has an input projection, one block
// per hidden width and an output layer.
int model_layer_count(const Deck& deck);

// Every cross-key rule; throws an input error that prints the numbers and a
// valid alternative. Advice that is not an error goes to `warnings`.
PipelineShape pipeline_shape(const Deck& deck, std::vector<std::string>* warnings = nullptr);

}  // namespace kpipe::config
