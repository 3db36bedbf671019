#include "kpipe/runtime/throughput.hpp"

#include <fmt/format.h>

namespace kpipe::runtime {

Throughput throughput(const model::ModelSpec& model, int global_batch, int ranks, double step_seconds,
                      double peak_gflops) {
  Throughput t;
  t.flops_per_step = static_cast<double>(model::training_flops_per_sample(model)) * global_batch;
  t.gflops = t.flops_per_step / step_seconds / 1e9;
  t.gflops_per_rank = t.gflops / ranks;
  if (peak_gflops > 0) t.utilisation = t.gflops_per_rank / peak_gflops;
  return t;
}

std::string Throughput::describe(double peak_gflops) const {
  std::string line =
      fmt::format("{:.4g} GFLOP/s in all, {:.4g} per rank (model FLOPs: 3 x forward, {:.4g} GFLOP a step)", gflops,
                  gflops_per_rank, flops_per_step / 1e9);
  if (utilisation) line += fmt::format("; {:.1f}% of runtime.peak_gflops = {:g}", 100.0 * *utilisation, peak_gflops);
  return line;
}

nlohmann::json Throughput::to_json() const {
  return {{"model_flops_per_step", flops_per_step},
          {"gflops_per_second", gflops},
          {"gflops_per_second_per_rank", gflops_per_rank},
          {"utilisation", utilisation ? nlohmann::json(*utilisation) : nlohmann::json()}};
}

}  // namespace kpipe::runtime
