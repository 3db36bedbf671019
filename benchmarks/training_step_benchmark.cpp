// The sequential training step of the quickstart model (inputs/quickstart.toml)
// on one rank: time per sample, for both GEMM paths (docs/performance-log.md).
#include <benchmark/benchmark.h>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"

namespace {

using namespace kpipe;

void BM_sequential_step(benchmark::State& state) {
  const auto path = state.range(0) == 0 ? "compute.gemm=vendor" : "compute.gemm=portable";
  const auto deck = config::parse_deck(config::read_deck_file(KPIPE_QUICKSTART_DECK), KPIPE_QUICKSTART_DECK, {path});
  const auto spec = model::TrainerSpec::from_config(config::run_config(deck));
  tensor::ExecContext exec;
  model::SequentialTrainer<float> trainer(spec, exec);
  trainer.step();  // first-touch allocations out of the measurement
  for (auto _ : state) trainer.step();
  state.SetLabel(path);
  state.counters["seconds_per_sample"] = benchmark::Counter(
      spec.global_batch, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_sequential_step)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
