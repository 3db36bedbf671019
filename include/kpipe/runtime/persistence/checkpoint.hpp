#pragma once
// Checkpoints of a pipelined run (DESIGN.md §5): the runtime's side of
// io/checkpoint.hpp. It names what a rank holds — the parameters of its
// chunks and their optimizer state, by global name — and lets every rank of
// the world agree on the outcome, so a bad checkpoint stops the job with one
// line on every rank.

#include <cstdint>
#include <string>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"

namespace kpipe::runtime {

// What a checkpoint records besides the tensors.
struct CheckpointRun {
  std::string deck;  // the resolved deck text, stored verbatim
};

// Collective over the world: writes the checkpoint of `steps_done` completed
// steps into checkpoint.path, keeping the last checkpoint.keep. Replica 0
// writes the tensors; each of its ranks the chunks it holds, tensor-parallel
// shards gathered into their global tensors (written by tensor rank 0), so
// any t can read them. Returns the file's path. Throws a runtime error when it cannot be written; the previous
// checkpoint stays as it was.
template <class Scalar>
std::string save_checkpoint(const Pipeline<Scalar>& pipeline, const config::CheckpointConfig& config,
                            const CheckpointRun& run, std::int64_t steps_done);

// Collective over the world: loads `file` into the pipeline — every rank the
// parameters (and, when training, the optimizer state and step count) of the
// chunks it holds, a shard sliced from its global tensor, whatever layout
// (p, v, t, d) wrote it — after checking the format, the
// model and every checksum. A bad file throws the same input error on every
// rank. Returns the steps the checkpoint had done: the next step to run.
template <class Scalar>
std::int64_t load_checkpoint(Pipeline<Scalar>& pipeline, const std::string& file);

}  // namespace kpipe::runtime
