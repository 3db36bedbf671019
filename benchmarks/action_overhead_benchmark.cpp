// The fixed cost of each action kind (issue 27): a pipeline whose layers are
// 1 wide and whose microbatches hold one sample, so an action computes next to
// nothing and its measured time is what the executor, the stage, the pool and
// MPI add around the work. For every kind, the median and the 10th percentile
// of its durations over all ranks and timed steps; a receive's median includes
// waiting for the peer, its 10th percentile is the cost when the message is
// already there; and the step's median, 90th percentile and mean over the timed
// steps (a slow step of a threaded rank weighs in the mean). JSON on stdout.
//
//   mpirun -n 2 action_overhead_benchmark benchmarks/decks/zero_work.toml [key=value ...]

#include <mpi.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deck_benchmark_main.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/schedule/action.hpp"

using namespace kpipe;

namespace {

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (const double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

nlohmann::json run(const config::RunConfig& config) {
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  const auto& actions = pipeline.schedule().ranks.at(pipeline.grid().pipeline_rank());
  constexpr int warm_up = 3;  // allocations, first touch
  for (int step = 0; step < warm_up; ++step) pipeline.run_step(step);

  std::vector<std::vector<double>> seconds(schedule::action_kind_count);
  std::vector<double> steps;
  for (int step = warm_up; step < warm_up + config.train.steps; ++step) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    const runtime::StepResult result = pipeline.run_step(step);
    steps.push_back(MPI_Wtime() - start);
    for (const runtime::ActionTiming& t : result.timings) {
      seconds[static_cast<std::size_t>(actions[t.index].kind)].push_back(t.end - t.start);
    }
  }
  const auto& s = pipeline.schedule();
  nlohmann::json kinds = nlohmann::json::object();
  for (int k = 0; k < schedule::action_kind_count; ++k) {
    const std::vector<double> all = comm::gather_varying_to_root(comm::world(), seconds[static_cast<std::size_t>(k)]);
    if (all.empty()) continue;
    kinds[std::string(schedule::name(static_cast<schedule::ActionKind>(k)))] = {
        {"count", all.size()}, {"median_us", 1e6 * quantile(all, 0.5)}, {"p10_us", 1e6 * quantile(all, 0.1)}};
  }
  const std::vector<double> all_steps = comm::gather_varying_to_root(comm::world(), steps);
  return {{"schedule", s.name},
          {"ranks", comm::size_of(comm::world())},
          {"p", s.p},
          {"m", s.m},
          {"actions_per_step_rank0", actions.size()},
          {"steps_timed", config.train.steps},
          {"median_step_us", all_steps.empty() ? 0.0 : 1e6 * quantile(all_steps, 0.5)},
          {"p90_step_us", all_steps.empty() ? 0.0 : 1e6 * quantile(all_steps, 0.9)},
          {"mean_step_us", all_steps.empty() ? 0.0 : 1e6 * mean(all_steps)},
          {"actions", kinds}};
}

}  // namespace

int main(int argc, char** argv) { return deck_benchmark_main(argc, argv, "action_overhead_benchmark", run); }
