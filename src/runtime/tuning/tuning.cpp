#include "kpipe/runtime/tuning/tuning.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "kpipe/comm/transport.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/run_plan.hpp"

namespace kpipe::runtime {

namespace {

schedule::LinearCost share(const schedule::LinearCost& cost, double fraction) {
  return {cost.fixed * fraction, cost.per_sample * fraction};
}

// What recomputation adds to a layer's B at b: its F again, or the share selective recomputation rebuilds.
double recompute_seconds(const LayerCost& cost, int b, config::Recompute recompute) {
  switch (recompute) {
    case config::Recompute::none:
      return 0.0;
    case config::Recompute::selective:
      return cost[3].at(b);
    case config::Recompute::full:
      return cost[0].at(b);
  }
  return 0.0;
}

// A layer's F + B + W at b, recomputation included.
double layer_seconds(const LayerCost& cost, int b, config::Recompute recompute) {
  return cost[0].at(b) + cost[1].at(b) + cost[2].at(b) + recompute_seconds(cost, b, recompute);
}

}  // namespace

std::vector<LayerCost> layer_costs(const schedule::CostFit& fit, const model::ModelSpec& model,
                                   const std::vector<model::LayerRange>& measured, kernels::AttentionPath attention) {
  if (measured.size() != fit.stages.size()) {
    throw input_error(fmt::format(
        "the costs were measured on {} model stages but the deck has {}; calibrate this deck (kpipe tune without "
        "--costs) or give costs of a run of it",
        fit.stages.size(), measured.size()));
  }
  const auto specs = model.layers();
  std::vector<LayerCost> layers(specs.size());
  for (std::size_t s = 0; s < measured.size(); ++s) {
    const model::LayerRange range = measured[s];
    double flops = 0.0;
    for (int l = range.first; l < range.end(); ++l) flops += static_cast<double>(model::forward_flops(specs[l]));
    for (int l = range.first; l < range.end(); ++l) {
      // Layers without FLOPs (activations) share a stage's time only when none has any.
      const double fraction =
          flops > 0.0 ? static_cast<double>(model::forward_flops(specs[l])) / flops : 1.0 / range.count;
      for (int k = 0; k < 3; ++k) layers[l][k] = share(fit.stages[s][k], fraction);
      const double forward = static_cast<double>(model::forward_flops(specs[l]));
      const double rebuilt = static_cast<double>(model::selective_recompute_flops(model, specs[l], attention));
      layers[l][3] = share(layers[l][0], forward > 0.0 ? rebuilt / forward : 0.0);
    }
  }
  return layers;
}

std::vector<LayerCost> layer_costs(const schedule::CostFit& fit, const config::RunConfig& config) {
  std::vector<LayerCost> layers =
      layer_costs(fit, model::ModelSpec::from_config(config.model), model::partition_layers(config),
                  model::kernel_choice(config.compute).attention);
  // A deck calibrated with recomputation measured it inside B: the layers' own B is the rest.
  const int rebuilt = config.pipeline.recompute == config::Recompute::full ? 0 : 3;
  if (config.pipeline.recompute != config::Recompute::none) {
    for (LayerCost& layer : layers) {
      layer[1] = {layer[1].fixed - layer[rebuilt].fixed, layer[1].per_sample - layer[rebuilt].per_sample};
    }
  }
  return layers;
}

std::vector<std::string> TuneCandidate::overrides() const {
  return {fmt::format("pipeline.schedule={}", schedule),
          fmt::format("pipeline.virtual_stages={}", v),
          fmt::format("train.microbatch_size={}", b),
          fmt::format("pipeline.recompute={}", config::name_of(recompute)),
          fmt::format("pipeline.extra_warmup={}", extra_warmup),
          fmt::format("pipeline.partition=[{}]", fmt::join(partition, ", ")),
          fmt::format("train.distributed_optimizer={}", distributed)};
}

std::string TuneCandidate::describe() const {
  return fmt::format("{}{} v={} b={} recompute={} [{}]{}", schedule,
                     extra_warmup > 0 ? fmt::format("+{}", extra_warmup) : "", v, b, config::name_of(recompute),
                     fmt::join(partition, ","), distributed ? " zero-1" : "");
}

std::vector<int> cost_balanced_partition(const std::vector<LayerCost>& layers, int b, config::Recompute recompute,
                                         int stages) {
  std::vector<std::int64_t> nanoseconds;
  for (const LayerCost& layer : layers) {
    nanoseconds.push_back(std::max<std::int64_t>(1, std::llround(1e9 * layer_seconds(layer, b, recompute))));
  }
  return model::balanced_counts(nanoseconds, stages);
}

schedule::Calibration candidate_calibration(const schedule::CostFit& fit, const std::vector<LayerCost>& layers,
                                            const TuneCandidate& candidate, int p, double compute_factor) {
  schedule::Calibration costs = fit.at(candidate.b);
  costs.p = p;
  costs.v = candidate.v;
  costs.microbatch_size = candidate.b;
  costs.stages.clear();
  int first = 0;
  for (const int count : candidate.partition) {
    schedule::StageCosts stage{0.0, 0.0, 0.0};
    for (int l = first; l < first + count; ++l) {
      stage.forward += layers[l][0].at(candidate.b);
      stage.backward_input += layers[l][1].at(candidate.b);
      stage.backward_weight += layers[l][2].at(candidate.b);
      stage.backward_input += recompute_seconds(layers[l], candidate.b, candidate.recompute);
    }
    stage.forward *= compute_factor;
    stage.backward_input *= compute_factor;
    stage.backward_weight *= compute_factor;
    costs.stages.push_back(stage);
    first += count;
  }
  return costs;
}

std::vector<int> refined_partition(const schedule::Schedule& schedule, int max_in_flight, const schedule::CostFit& fit,
                                   const std::vector<LayerCost>& layers, const TuneCandidate& candidate,
                                   double compute_factor) {
  TuneCandidate trial = candidate;
  const auto step = [&] {
    return schedule::predict_step(schedule, candidate_calibration(fit, layers, trial, schedule.p, compute_factor),
                                  max_in_flight)
        .step_seconds;
  };
  double best = step();
  const std::size_t stages = trial.partition.size();
  // Each pass tries every single-layer move and keeps each that helps; a
  // bounded number of passes keeps the search to a few hundred simulations.
  for (std::size_t pass = 0; pass < 2 * stages; ++pass) {
    bool moved = false;
    for (std::size_t boundary = 0; boundary + 1 < stages; ++boundary) {
      for (const bool forward : {true, false}) {
        int& from = trial.partition[forward ? boundary : boundary + 1];
        int& to = trial.partition[forward ? boundary + 1 : boundary];
        if (from <= 1) continue;
        --from;
        ++to;
        const double seconds = step();
        if (seconds < best * (1.0 - 1e-9)) {
          best = seconds;
          moved = true;
        } else {
          ++from;
          --to;
        }
      }
    }
    if (!moved) break;
  }
  return trial.partition;
}

TunePrediction predict_candidate(config::RunConfig config, const schedule::CostFit& fit,
                                 const std::vector<LayerCost>& layers, const TuneCandidate& candidate,
                                 double compute_factor, std::int64_t baseline) {
  const schedule::RunPlan plan = schedule::run_plan(config);
  const schedule::Schedule schedule = schedule::make_schedule(plan);
  TuneCandidate refined = candidate;
  refined.partition = refined_partition(schedule, plan.costs.max_in_flight, fit, layers, candidate, compute_factor);
  const schedule::CalibratedStep step = schedule::predict_step(
      schedule, candidate_calibration(fit, layers, refined, schedule.p, compute_factor), plan.costs.max_in_flight);
  config.pipeline.partition = refined.partition;  // what the memory estimate places on each rank
  const auto spec = model::TrainerSpec::from_config(config);
  TunePrediction prediction{refined.partition, step.step_seconds, step.bubble, {}};
  for (int rank = 0; rank < schedule.p; ++rank) {
    const MemoryEstimate estimate = estimate_memory(spec, schedule, rank, config.pipeline.tensor_parallel,
                                                    !comm::mpi_reaches_device_memory(), baseline);
    prediction.peak_mib.push_back(static_cast<double>(estimate.total()) / (1 << 20));
  }
  return prediction;
}

double TunePrediction::largest_peak_mib() const { return *std::max_element(peak_mib.begin(), peak_mib.end()); }

int chunks_taken(const schedule::ScheduleInfo& info, const config::RunConfig& config,
                 std::initializer_list<int> chunks) {
  const config::PipelineConfig& shape = config.pipeline;
  for (const int v : chunks) {
    if (!info.check({shape.stages, v, shape.microbatches, config.train.microbatch_size, shape.data_parallel, {}})) {
      return v;
    }
  }
  return 0;
}

std::vector<TuneCandidate> tune_shapes(const config::RunConfig& config) {
  const model::ModelSpec model = model::ModelSpec::from_config(config.model);
  const int layers = model.layer_count();
  const bool selective = model::keeps_less_selectively(model, model::kernel_choice(config.compute).attention);
  const config::PipelineConfig& pipeline = config.pipeline;
  const int per_replica = config.train.global_batch / pipeline.data_parallel;
  std::vector<TuneCandidate> shapes;
  for (const std::string& name : schedule::schedule_names()) {
    const schedule::ScheduleInfo& info = schedule::find_schedule(name);
    if (!info.trains) continue;
    for (const int v : {1, 2, 4}) {
      if (pipeline.stages * v > layers) continue;
      for (int b = 1; b <= per_replica; ++b) {
        if (per_replica % b != 0) continue;
        const schedule::ShapeCheck shape{pipeline.stages, v, per_replica / b, b, pipeline.data_parallel, {}};
        if (info.check(shape)) continue;
        for (const auto recompute : {config::Recompute::none, config::Recompute::selective, config::Recompute::full}) {
          if (recompute == config::Recompute::selective && !selective) continue;
          // One extra warm-up forward costs a stashed microbatch and, where
          // actions jitter, buys back stalls: the calibrated draws judge it.
          for (int extra = 0; extra <= (info.takes_extra_warmup ? 1 : 0); ++extra) {
            for (const bool distributed : {false, true}) {
              if (distributed && pipeline.data_parallel == 1) continue;
              shapes.push_back({name, v, b, recompute, {}, extra, distributed});
            }
          }
        }
      }
    }
  }
  return shapes;
}

}  // namespace kpipe::runtime
