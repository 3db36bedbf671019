// Pipelined against sequential training on the same deck (DESIGN.md §1): the
// step time of the sequential trainer on one rank, the step time of the
// pipeline on p ranks, and the pipeline's measured bubble next to the one the
// simulator predicts from costs measured in the same run. JSON on stdout.
//
//   mpirun -n 2 pipeline_benchmark benchmarks/decks/compute_bound.toml [key=value ...]

#include <mpi.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deck_benchmark_main.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"

using namespace kpipe;

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds per step of the sequential reference, on world rank 0 alone.
std::vector<double> sequential_steps(const config::RunConfig& config, int steps) {
  tensor::ExecContext exec;
  model::SequentialTrainer<float> trainer(model::TrainerSpec::from_config(config), exec);
  trainer.step();  // warm-up: allocations, first touch
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const double start = MPI_Wtime();
    trainer.step();
    seconds.push_back(MPI_Wtime() - start);
  }
  return seconds;
}

nlohmann::json bubble_json(const schedule::Bubble& b) {
  return {{"idle_over_useful", b.idle_over_useful}, {"idle_over_total", b.idle_over_total}};
}

nlohmann::json run(const config::RunConfig& config) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int steps = config.train.steps;

  std::vector<double> sequential;
  if (rank == 0) sequential = sequential_steps(config, steps);
  MPI_Barrier(MPI_COMM_WORLD);

  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  const auto& grid = pipeline.grid();
  runtime::global_loss(pipeline.grid(), pipeline.run_step(0));  // warm-up
  std::vector<double> seconds, measured_useful, measured_total, makespans;
  std::vector<std::vector<runtime::ActionTiming>> timings;
  for (int step = 1; step <= steps; ++step) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    const runtime::StepResult result = pipeline.run_step(step);
    runtime::global_loss(pipeline.grid(), result);
    seconds.push_back(MPI_Wtime() - start);
    const auto measured =
        runtime::measure_bubble(pipeline.schedule(), grid.pipeline_rank(), result.timings, grid.pipeline());
    measured_useful.push_back(measured.bubble.idle_over_useful);
    measured_total.push_back(measured.bubble.idle_over_total);
    makespans.push_back(measured.makespan);
    timings.push_back(result.timings);
  }
  const schedule::CostModel costs =
      runtime::measured_costs(pipeline.schedule(), grid.pipeline_rank(), timings, grid.pipeline());
  const schedule::SimulationResult simulated = schedule::simulate(pipeline.schedule(), costs);

  nlohmann::json stage_costs = nlohmann::json::array();
  for (const auto& c : costs.stages) {
    stage_costs.push_back(
        {{"forward_ms", 1e3 * c.forward}, {"backward_ms", 1e3 * (c.backward_input + c.backward_weight)}});
  }
  const auto& s = pipeline.schedule();
  const double sequential_step = rank == 0 ? median(sequential) : 0.0;
  const double pipeline_step = median(seconds);
  return {{"schedule", s.name},
          {"p", s.p},
          {"v", s.v},
          {"m", s.m},
          {"global_batch", pipeline.spec().global_batch},
          {"steps_timed", steps},
          {"sequential",
           {{"ranks", 1},
            {"median_step_ms", 1e3 * sequential_step},
            {"samples_per_second", pipeline.spec().global_batch / sequential_step}}},
          {"pipeline",
           {{"ranks", grid.pipeline_size() * grid.replicas()},
            {"median_step_ms", 1e3 * pipeline_step},
            {"samples_per_second", pipeline.spec().global_batch / pipeline_step},
            {"median_pipeline_makespan_ms", 1e3 * median(makespans)}}},
          {"speedup", sequential_step / pipeline_step},
          {"bubble",
           {{"measured", {{"idle_over_useful", median(measured_useful)}, {"idle_over_total", median(measured_total)}}},
            {"simulated_measured_costs", bubble_json(simulated.bubble())},
            {"simulated_makespan_ms", 1e3 * simulated.makespan},
            {"theoretical_idle_over_useful", static_cast<double>(s.p - 1) / (s.v * s.m)}}},
          {"measured_stage_costs", stage_costs}};
}

}  // namespace

int main(int argc, char** argv) { return deck_benchmark_main(argc, argv, "pipeline_benchmark", run); }
