// Trains an MLP classifier described in code on 2 pipeline stages through
// kpipe's public session API: four steps, a validation and a checkpoint in
// one session; a second session restores that checkpoint and runs the last
// four. Writes every step's loss and the validations to OUT_DIR/losses.json.
//   mpirun -n 2 train_in_code OUT_DIR
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/runtime/session.hpp"
#include "kpipe/tensor/compat.hpp"

namespace {

// The model, data, schedule and run, as keys written in code: no deck file.
kpipe::config::RunConfig configuration(const std::string& checkpoints) {
  const std::string keys =
      "model.hidden = [64, 64, 64]\nmodel.output_dim = 10\n"
      "train.global_batch = 64\ntrain.microbatch_size = 8\ntrain.steps = 8\n"
      "train.eval_every = 4\npipeline.stages = 2\npipeline.schedule = \"1f1b\"\n"
      "checkpoint.path = \"" +
      checkpoints + "\"\n";
  return kpipe::config::run_config(kpipe::config::parse_deck(keys, "train_in_code"));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kpipe::tensor::compat::initialize(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    const std::string out = argc > 1 ? argv[1] : ".";
    const kpipe::config::RunConfig config = configuration(out);
    nlohmann::json losses = nlohmann::json::array(), validation = nlohmann::json::array();
    kpipe::runtime::SessionHooks hooks;
    hooks.step_accounted = [&](const kpipe::runtime::StepOutcome& step) { losses.push_back(step.loss); };
    hooks.validated = [&](int steps_done, double loss, int, double) {
      validation.push_back({{"step", steps_done}, {"loss", loss}});
    };

    std::string checkpoint;
    {
      kpipe::runtime::TrainingSession first(config, {}, hooks);
      while (first.steps_done() < 4) first.step();  // the validation after step 4 is train.eval_every's
      checkpoint = first.checkpoint();
    }
    kpipe::runtime::TrainingSession second(config, {}, hooks);
    second.restore(checkpoint);
    const auto state = second.run();
    if (rank == 0) {
      std::printf("train_in_code: restored %s, %d steps, %s, last loss %.6f\n", checkpoint.c_str(), second.steps_done(),
                  state == kpipe::runtime::SessionState::finished ? "finished" : "stopped",
                  losses.back().get<double>());
      std::ofstream(out + "/losses.json")
          << nlohmann::json{{"losses", losses}, {"validation", validation}}.dump(2) << '\n';
    }
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
