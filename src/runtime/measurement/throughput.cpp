#include "kpipe/runtime/measurement/throughput.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::runtime {

ReferenceRate reference_rate(const config::RunConfig& config) {
  if (config.runtime.peak_gflops > 0) return {config.runtime.peak_gflops, "runtime.peak_gflops"};
  const kernels::GemmPath gemm = model::kernel_choice(config.compute).gemm;
  constexpr int n = 1024;
  const tensor::ExecutionSpace space;
  // The product's 12 MiB are freed at once and are not the run's: where they
  // raised the peak resident memory, it is reset (to what the process holds,
  // as small before set-up as it was before them).
  const std::int64_t peak_before = peak_resident_bytes();
  double best = 0;
  {
    const auto A = tensor::uninitialized_matrix<float>("kpipe::reference_rate::A", n, n);
    const auto B = tensor::uninitialized_matrix<float>("kpipe::reference_rate::B", n, n);
    const auto C = tensor::uninitialized_matrix<float>("kpipe::reference_rate::C", n, n);
    kernels::fill_uniform(space, 1, -1.0, 1.0, A);
    kernels::fill_uniform(space, 2, -1.0, 1.0, B);
    for (int repeat = 0; repeat < 4; ++repeat) {
      const auto start = std::chrono::steady_clock::now();
      kernels::gemm<float>(space, kernels::Trans::no, kernels::Trans::no, 1.0f, A, B, 0.0f, C, gemm);
      space.fence();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (repeat > 0) best = std::max(best, 2.0 * n * n * n / seconds / 1e9);  // the first warms up
    }
  }
  release_free_memory();
  if (peak_resident_bytes() > peak_before) reset_peak_resident();
  return {best, "one thread's 1024³ sgemm here"};
}

Throughput throughput(const model::ModelSpec& model, int global_batch, int ranks, double step_seconds,
                      const ReferenceRate& reference) {
  Throughput t;
  t.flops_per_step = static_cast<double>(model::training_flops_per_sample(model)) * global_batch;
  t.gflops = t.flops_per_step / step_seconds / 1e9;
  t.gflops_per_rank = t.gflops / ranks;
  t.reference = reference;
  t.utilisation = t.gflops_per_rank / reference.gflops;
  return t;
}

std::string Throughput::describe() const {
  return fmt::format(
      "{:.4g} GFLOP/s in all, {:.4g} per rank (model FLOPs: 3 x forward, {:.4g} GFLOP a step); {:.1f}% of {} "
      "({:.4g} GFLOP/s)",
      gflops, gflops_per_rank, flops_per_step / 1e9, 100.0 * utilisation, reference.source, reference.gflops);
}

nlohmann::json Throughput::to_json() const {
  return {{"model_flops_per_step", flops_per_step},
          {"gflops_per_second", gflops},
          {"gflops_per_second_per_rank", gflops_per_rank},
          {"reference_gflops_per_second", reference.gflops},
          {"reference", reference.source},
          {"utilisation", utilisation}};
}

}  // namespace kpipe::runtime
