#pragma once
// A training run's throughput as a utilisation, as Megatron-LM (TFLOP/s per
// GPU) and torchtitan (MFU) report theirs: the model FLOPs of a step
// (model::training_flops_per_sample times B) over the step's seconds, in all
// and per rank, and its share of one rank's reference rate
// (runtime.peak_gflops) where the deck gives one. `kpipe run` reports it
// measured, `kpipe plan --costs` predicted.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kpipe/model/spec.hpp"

namespace kpipe::runtime {

struct Throughput {
  double flops_per_step = 0.0;
  double gflops = 0.0;                // all ranks together
  double gflops_per_rank = 0.0;       // the average rank's
  std::optional<double> utilisation;  // gflops_per_rank over runtime.peak_gflops, where set

  // The summary's line: the rates in all and per rank, the FLOPs a step, and the utilisation where known.
  std::string describe(double peak_gflops) const;
  nlohmann::json to_json() const;
};

Throughput throughput(const model::ModelSpec& model, int global_batch, int ranks, double step_seconds,
                      double peak_gflops);

}  // namespace kpipe::runtime
