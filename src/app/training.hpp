#pragma once
// Pieces `kpipe run` and `kpipe sweep` share: building a rank's pipeline
// (set-up agreed by every rank) and what its stages keep stashed.

#include <cstddef>
#include <memory>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/pipeline.hpp"

namespace kpipe::app {

// Set-up runs on every rank on its own (allocations, the rank's stages) and
// may fail on one rank only: all ranks agree on it before the first step.
std::unique_ptr<runtime::Pipeline<float>> build_pipeline(const config::RunConfig& config, runtime::Mode mode);

// The most bytes this rank's stages held stashed at once, summed over its chunks.
std::size_t peak_stashed_bytes(const runtime::Pipeline<float>& pipeline);

}  // namespace kpipe::app
