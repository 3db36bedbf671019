// Kokkos allocations per step of the sequential trainer on the quickstart
// model (inputs/quickstart.toml): count and bytes per memory space, the first
// step against the later ones, which must allocate nothing (DESIGN.md §3).
// JSON on stdout; `allocation_benchmark [DECK] [key=value ...]`.
#include <Kokkos_Core.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kpipe/config/deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "kpipe/tensor/compat.hpp"

using namespace kpipe;

namespace {

nlohmann::json tally_json(const tensor::AllocationCounter& counter) {
  nlohmann::json spaces = nlohmann::json::object();
  for (const auto& [space, tally] : counter.by_memory_space()) {
    spaces[space] = {{"count", tally.count}, {"bytes", tally.bytes}};
  }
  return {{"count", counter.total().count}, {"bytes", counter.total().bytes}, {"by_memory_space", spaces}};
}

nlohmann::json run(const std::string& deck_path, const std::vector<std::string>& overrides, int steps) {
  const auto deck = config::parse_deck(config::read_deck_file(deck_path), deck_path, overrides);
  const auto spec = model::TrainerSpec::from_deck(deck);
  tensor::ExecContext exec;
  tensor::AllocationCounter counter;
  counter.start();
  model::SequentialTrainer<float> trainer(spec, exec);
  counter.stop();
  nlohmann::json result = {{"benchmark", "sequential_trainer_allocations"},
                           {"deck", deck_path},
                           {"overrides", overrides},
                           {"kokkos", tensor::compat::kokkos_version()},
                           {"execution_space", Kokkos::DefaultExecutionSpace::name()},
                           {"global_batch", spec.global_batch},
                           {"microbatch_size", spec.microbatch_size},
                           {"construction", tally_json(counter)}};
  nlohmann::json per_step = nlohmann::json::array();
  for (int step = 0; step < steps; ++step) {
    counter.start();
    trainer.step();
    counter.stop();
    per_step.push_back(tally_json(counter));
  }
  result["steps"] = per_step;
  result["pool"] = {{"buffers", exec.pool().buffers()}, {"bytes", exec.pool().bytes()}};
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  int status = 0;
  try {
    std::string deck = KPIPE_QUICKSTART_DECK;
    std::vector<std::string> overrides;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.find('=') != std::string::npos) {
        overrides.push_back(arg);
      } else {
        deck = arg;
      }
    }
    std::cout << run(deck, overrides, 3).dump(2) << "\n";
  } catch (const Error& e) {
    std::cerr << "allocation_benchmark: " << e.what() << "\n";
    status = 2;
  }
  Kokkos::finalize();
  return status;
}
