#pragma once
// What `kpipe tune` searches (docs/performance-log.md, "kpipe tune"): every
// training schedule, v, microbatch size b and recomputation that the deck's
// ranks can run, each partitioned by measured per-layer costs, predicted by
// the calibrated simulator, and the best few measured.
//
// The per-layer costs come from a calibration of the deck as written: each
// measured model stage's F, B and W (lines in b, schedule::CostFit) shared
// among its layers in proportion to their forward FLOPs. A candidate's model
// stage then costs the sum of its layers', and with full recomputation its B
// also runs its F again, with selective recomputation the share of F its
// layers rebuild (LayerFootprint::recompute_flops); messages, receives and
// the step's overhead stay the calibration's at the candidate's b.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/kernels/choices.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::runtime {

// F, B and W of one layer, and what selective recomputation adds to its B,
// as lines in b (seconds).
using LayerCost = std::array<schedule::LinearCost, 4>;

// The costs of every layer of `model` from `fit`, measured on `measured` (the
// calibrated run's partition, one range per model stage of the fit), with
// `attention`'s selective recomputation.
std::vector<LayerCost> layer_costs(const schedule::CostFit& fit, const model::ModelSpec& model,
                                   const std::vector<model::LayerRange>& measured,
                                   kernels::AttentionPath attention = kernels::AttentionPath::gemm);

// The same for the deck `config` (its model, its partition and its
// attention), the B of each layer without the deck's recomputation.
std::vector<LayerCost> layer_costs(const schedule::CostFit& fit, const config::RunConfig& config);

// One configuration of the search: the deck with these keys changed.
struct TuneCandidate {
  std::string schedule;
  int v = 1;
  int b = 1;
  config::Recompute recompute = config::Recompute::none;
  std::vector<int> partition;  // layers per model stage, balanced by the layer costs
  int extra_warmup = 0;        // pipeline.extra_warmup, for schedules that take it
  bool distributed = false;    // train.distributed_optimizer, where d > 1

  // "pipeline.schedule=zb-v", ... : the overrides that make the deck this candidate.
  std::vector<std::string> overrides() const;
  // "zb-v v=2 b=16 recompute=none [3, 2, 2, 3]"; "1f1b+1 ..." with one extra
  // warm-up forward; " zero-1" ends it with the distributed optimizer
  std::string describe() const;
};

// Layer counts of `stages` model stages at microbatch size b whose slowest
// stage (F + B + W, with recomputation's second F) is as fast as it can be.
std::vector<int> cost_balanced_partition(const std::vector<LayerCost>& layers, int b, config::Recompute recompute,
                                         int stages);

// The calibration of a candidate: `fit` at its b for messages and overhead,
// its stages' compute from the layer costs over `partition`, times
// `compute_factor` (its schedule's compute measured beside the deck's).
schedule::Calibration candidate_calibration(const schedule::CostFit& fit, const std::vector<LayerCost>& layers,
                                            const TuneCandidate& candidate, int p, double compute_factor = 1.0);

// The candidate's partition moved one layer at a time across a stage
// boundary while its calibrated step on `schedule` (the candidate's, whose
// max_in_flight is the deck's) gets shorter: the slowest stage alone is not
// the critical path of every schedule (a V's turn, warm-up lengths).
std::vector<int> refined_partition(const schedule::Schedule& schedule, int max_in_flight, const schedule::CostFit& fit,
                                   const std::vector<LayerCost>& layers, const TuneCandidate& candidate,
                                   double compute_factor);

// What the simulator and the memory estimate say of a candidate.
struct TunePrediction {
  std::vector<int> partition;  // the candidate's, refined (refined_partition)
  double step_seconds = 0.0;   // calibrated, as kpipe plan --costs predicts a step
  schedule::Bubble bubble;
  std::vector<double> peak_mib;  // per pipeline rank: its memory estimate (`baseline` bytes of process included)
  double largest_peak_mib() const;
};
// `config` is the deck with the candidate's keys (TuneCandidate::overrides);
// its schedule is generated once, for the refinement and the prediction.
TunePrediction predict_candidate(config::RunConfig config, const schedule::CostFit& fit,
                                 const std::vector<LayerCost>& layers, const TuneCandidate& candidate,
                                 double compute_factor, std::int64_t baseline);

// The first of `chunks` (v, per rank) that `info` takes for the deck's p, m,
// b and d (schedule::ScheduleInfo::check); 0 where it takes none of them.
int chunks_taken(const schedule::ScheduleInfo& info, const config::RunConfig& config,
                 std::initializer_list<int> chunks);

// Every candidate shape of the deck's p, d and B: the registry's training
// schedules, v in {1, 2, 4}, each b dividing B/d, recomputation none,
// selective and full, with d > 1 the optimizer distributed or not,
// where the schedule's check accepts (p, v, m) and p·v model stages fit the
// model's layers (selective recomputation where it keeps less than none,
// model::keeps_less_selectively); partitions are left empty for the caller.
std::vector<TuneCandidate> tune_shapes(const config::RunConfig& config);

}  // namespace kpipe::runtime
