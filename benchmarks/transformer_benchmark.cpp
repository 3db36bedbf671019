// Training throughput of the character transformer (inputs/kjv-char.toml):
// the sequential trainer on rank 0 with the share of its step spent in
// attention, in the Linear layers (their GEMMs and bias) and in the rest, then
// the deck's pipelined run on every rank; JSON on stdout (docs/performance-log.md).
// The sequential part also reports its process CPU time per step.
//
//   mpirun -n 2 build/benchmarks/transformer_benchmark [DECK] [STEPS] [key=value ...]
//
// On a rank count other than the deck's p · d only the sequential part runs.
//
// Without the deck's text file the synthetic token stream stands in (the
// step's cost does not depend on which tokens it reads).
#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/tensor/compat.hpp"

namespace {

using namespace kpipe;
using Clock = std::chrono::steady_clock;

// Inclusive seconds per profiling region of the model's leaf layers, loss and
// optimizer, from Kokkos Tools callbacks (the Serial backend runs kernels
// synchronously, so host time is kernel time). Composite layers (residual)
// contain leaves and are left out.
struct RegionTimes {
  std::vector<std::pair<std::string, Clock::time_point>> open;
  std::map<std::string, double> seconds;
};
RegionTimes regions;

bool leaf(const std::string& name) {
  return name.rfind("kpipe::model::", 0) == 0 && name.rfind("kpipe::model::residual", 0) != 0;
}

void push_region(const char* name) { regions.open.emplace_back(name, Clock::now()); }
void pop_region() {
  const auto [name, start] = regions.open.back();
  regions.open.pop_back();
  if (leaf(name)) regions.seconds[name] += std::chrono::duration<double>(Clock::now() - start).count();
}

// The seconds of the regions whose name starts with `prefix`.
double seconds_of(const std::string& prefix) {
  double total = 0;
  for (const auto& [name, seconds] : regions.seconds) total += name.rfind(prefix, 0) == 0 ? seconds : 0.0;
  return total;
}

config::RunConfig load(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : KPIPE_KJV_DECK;
  std::vector<std::string> overrides(argv + std::min(argc, 3), argv + argc);
  auto config = config::run_config(config::parse_deck(config::read_deck_file(path), path, overrides));
  if (config.data.source == "text" && !std::filesystem::exists(config.data.path)) {
    config.data.source = "synthetic";
  }
  config.train.eval_every = 0;
  config.checkpoint.every = 0;
  return config;
}

nlohmann::json sequential(const config::RunConfig& config, int steps) {
  tensor::ExecContext exec;
  const auto spec = model::TrainerSpec::from_config(config);
  model::SequentialTrainer<float> trainer(spec, exec,
                                          runtime::make_data_source<float>(config.data, spec, io::Split::train, exec));
  for (int warm = 0; warm < 3; ++warm) trainer.step();
  Kokkos::Tools::Experimental::set_push_region_callback(&push_region);
  Kokkos::Tools::Experimental::set_pop_region_callback(&pop_region);
  const auto start = Clock::now();
  const std::clock_t cpu_start = std::clock();
  for (int step = 0; step < steps; ++step) trainer.step();
  exec.fence();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // On a shared machine the process's CPU time is the steadier measure of its work.
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  Kokkos::Tools::Experimental::set_pop_region_callback(nullptr);
  const double tokens = static_cast<double>(spec.global_batch) * spec.model.context * steps;
  const double attention = seconds_of("kpipe::model::attention"), linear = seconds_of("kpipe::model::linear");
  nlohmann::json by_region;
  for (const auto& [name, time] : regions.seconds) by_region[name] = time / seconds;
  return {{"tokens_per_second", tokens / seconds},
          {"seconds_per_step", seconds / steps},
          {"cpu_tokens_per_second", tokens / cpu_seconds},
          {"cpu_seconds_per_step", cpu_seconds / steps},
          {"share",
           {{"attention", attention / seconds},
            {"linear_gemm_and_bias", linear / seconds},
            {"rest", (seconds - attention - linear) / seconds}}},
          {"share_by_region", by_region}};
}

nlohmann::json pipelined(const config::RunConfig& config, int steps) {
  runtime::Pipeline<float> pipeline(config, comm::world(), runtime::Mode::train);
  for (int warm = 0; warm < 3; ++warm) pipeline.run_step(warm);
  comm::barrier(comm::world());
  const double start = comm::wall_time();
  for (int step = 3; step < 3 + steps; ++step) pipeline.run_step(step);
  comm::barrier(comm::world());
  const double seconds = comm::wall_time() - start;
  const double tokens = static_cast<double>(config.train.global_batch) * config.model.context * steps;
  return {{"schedule", config.pipeline.schedule},
          {"p", config.pipeline.stages},
          {"d", config.pipeline.data_parallel},
          {"tokens_per_second", tokens / seconds},
          {"seconds_per_step", seconds / steps}};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kpipe::tensor::compat::initialize(argc, argv);
  int code = 0;
  try {
    const config::RunConfig config = load(argc, argv);
    const int steps = argc > 2 ? std::stoi(argv[2]) : 20;
    const int rank = comm::rank_of(comm::world());
    nlohmann::json result = {{"deck", argc > 1 ? argv[1] : KPIPE_KJV_DECK},
                             {"data", config.data.source == "text" ? config.data.path : "synthetic"},
                             {"tokens_per_step", config.train.global_batch * config.model.context},
                             {"steps", steps}};
    if (rank == 0) result["sequential"] = sequential(config, steps);
    comm::barrier(comm::world());
    // On one rank (or any other count than the deck's p · d) the sequential trainer alone.
    if (comm::size_of(comm::world()) == config.pipeline.world_size()) {
      result["pipelined"] = pipelined(config, steps);
      if (rank == 0) {
        result["speedup"] = result["pipelined"]["tokens_per_second"].get<double>() /
                            result["sequential"]["tokens_per_second"].get<double>();
      }
    }
    if (rank == 0) std::cout << result.dump(2) << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "transformer_benchmark: " << e.what() << std::endl;
    code = 2;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
