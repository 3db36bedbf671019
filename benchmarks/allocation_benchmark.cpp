// Kokkos allocations per training step (DESIGN.md §3: no hot-path allocation
// after the first step): the sequential trainer on world rank 0, then the
// pipeline on every rank, each step counted separately, with count and bytes
// per memory space. JSON on stdout (rank 0 gathers every rank's counts):
//   mpirun -n 2 allocation_benchmark DECK [key=value ...]
#include <Kokkos_Core.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deck_benchmark_main.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "kpipe/tensor/compat.hpp"

using namespace kpipe;

namespace {

constexpr int steps = 4;

nlohmann::json tally_json(const tensor::AllocationCounter& counter) {
  nlohmann::json spaces = nlohmann::json::object();
  for (const auto& [space, tally] : counter.by_memory_space()) {
    spaces[space] = {{"count", tally.count}, {"bytes", tally.bytes}};
  }
  return {{"count", counter.total().count}, {"bytes", counter.total().bytes}, {"by_memory_space", spaces}};
}

// Counts what `build` allocates, then what each of `steps` calls of `step` allocates.
template <class Build, class Step>
nlohmann::json count(Build&& build, Step&& step) {
  tensor::AllocationCounter counter;
  counter.start();
  auto trainer = build();
  counter.stop();
  nlohmann::json result = {{"construction", tally_json(counter)}};
  nlohmann::json per_step = nlohmann::json::array();
  for (int s = 0; s < steps; ++s) {
    counter.start();
    step(*trainer, s);
    counter.stop();
    per_step.push_back(tally_json(counter));
  }
  result["steps"] = per_step;
  return result;
}

nlohmann::json run(const config::RunConfig& config, const std::string& deck_path) {
  const int rank = comm::rank_of(comm::world());
  nlohmann::json result = {{"benchmark", "allocations_per_step"},
                           {"deck", deck_path},
                           {"kokkos", tensor::compat::kokkos_version()},
                           {"execution_space", Kokkos::DefaultExecutionSpace::name()}};
  tensor::ExecContext exec;
  if (rank == 0) {
    result["sequential"] = count(
        [&] {
          return std::make_unique<model::SequentialTrainer<float>>(model::TrainerSpec::from_config(config), exec);
        },
        [](model::SequentialTrainer<float>& trainer, int) { trainer.step(); });
  }
  comm::barrier(comm::world());
  const nlohmann::json mine =
      count([&] { return std::make_unique<runtime::Pipeline<float>>(config, comm::world(), runtime::Mode::train); },
            [](runtime::Pipeline<float>& pipeline, int s) { pipeline.run_step(s); });
  // One JSON text per rank, gathered as characters on rank 0.
  const std::string text = mine.dump();
  std::vector<double> chars(text.begin(), text.end());
  std::vector<int> counts;
  const std::vector<double> all = comm::all_gather_varying(comm::world(), chars, &counts);
  if (rank == 0) {
    nlohmann::json ranks = nlohmann::json::array();
    std::size_t offset = 0;
    for (const int n : counts) {
      ranks.push_back(nlohmann::json::parse(std::string(all.begin() + offset, all.begin() + offset + n)));
      offset += static_cast<std::size_t>(n);
    }
    result["pipeline_ranks"] = ranks;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  return deck_benchmark_main(argc, argv, "allocation_benchmark",
                             [&](const config::RunConfig& config) { return run(config, argv[1]); });
}
