#pragma once
// A training run's throughput as a utilisation, as Megatron-LM (TFLOP/s per
// GPU) and torchtitan (MFU) report theirs: the model FLOPs of a step
// (model::training_flops_per_sample times B) over the step's seconds, in all
// and per rank, and its share of one rank's reference rate: the deck's
// runtime.peak_gflops (a GPU's or a site's figure), or else this machine's
// own one-thread sgemm rate, measured at start-up. `kpipe run` reports it
// measured, `kpipe plan --costs` predicted.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::runtime {

// One rank's reference rate and where it comes from ("runtime.peak_gflops",
// "one thread's 1024³ sgemm here").
struct ReferenceRate {
  double gflops = 0.0;
  std::string source;
};

// runtime.peak_gflops where positive; else the rate of a 1024 x 1024 x 1024
// float product through the deck's compute.gemm on this thread, the best of
// three after a warm-up (a few hundredths of a second on a CPU), its memory
// freed and left out of the process's peak. TrainingSession measures it
// before set-up.
ReferenceRate reference_rate(const config::RunConfig& config);

struct Throughput {
  double flops_per_step = 0.0;
  double gflops = 0.0;           // all ranks together
  double gflops_per_rank = 0.0;  // the average rank's
  ReferenceRate reference;
  double utilisation = 0.0;  // gflops_per_rank over the reference rate

  // The summary's line: the rates in all and per rank, the FLOPs a step, and the utilisation.
  std::string describe() const;
  nlohmann::json to_json() const;
};

Throughput throughput(const model::ModelSpec& model, int global_batch, int ranks, double step_seconds,
                      const ReferenceRate& reference);

}  // namespace kpipe::runtime
