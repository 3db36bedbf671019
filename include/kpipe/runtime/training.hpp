#pragma once
// Pieces `kpipe run`, `infer`, `sweep` and `generate` share: building a rank's
// pipeline (set-up agreed by every rank), loading its checkpoint and what its
// stages keep stashed.

#include <cstddef>
#include <memory>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"

namespace kpipe::runtime {

// Set-up runs on every rank on its own (allocations, the rank's stages) and
// may fail on one rank only: all ranks agree on it before the first step.
std::unique_ptr<runtime::Pipeline<float>> build_pipeline(const config::RunConfig& config, runtime::Mode mode);

class RunReport;

// Loads checkpoint.restart (every rank agrees on a bad file: exit code 2),
// tells `report` (optional) and returns the next step to run; 0 without a restart.
int restore(runtime::Pipeline<float>& pipeline, const config::CheckpointConfig& checkpoint,
            RunReport* report = nullptr);

// The most bytes this rank's stages held stashed at once, summed over its chunks.
std::size_t peak_stashed_bytes(const runtime::Pipeline<float>& pipeline);

}  // namespace kpipe::runtime
