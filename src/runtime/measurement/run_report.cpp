#include "kpipe/runtime/measurement/run_report.hpp"

#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/tuning/traffic_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::runtime {

namespace {

// Steady-state mean: the first step warms caches and allocators, so it is left
// out whenever there is more than one; so are the steps at `left_out`
// (ascending indices).
template <class T, class Get>
double steady_mean(const std::vector<T>& values, Get get, const std::vector<std::size_t>& left_out = {}) {
  if (values.empty()) return 0.0;
  const std::size_t first = values.size() > 1 ? 1 : 0;
  double sum = 0.0;
  std::size_t count = 0;
  auto skip = left_out.begin();
  for (std::size_t i = first; i < values.size(); ++i) {
    if (skip != left_out.end() && *skip == i) {
      ++skip;
      continue;
    }
    sum += get(values[i]);
    ++count;
  }
  return count > 0 ? sum / static_cast<double>(count) : 0.0;
}

nlohmann::json to_json(const schedule::Bubble& b) {
  return {{"idle_over_useful", b.idle_over_useful}, {"idle_over_total", b.idle_over_total}};
}

}  // namespace

RunReport::RunReport(const runtime::Pipeline<float>& pipeline, const config::RunConfig& config, ReferenceRate reference)
    : pipeline_(pipeline),
      reference_(std::move(reference)),
      predicted_traffic_(predicted_traffic(pipeline.traffic(), pipeline.schedule(), config.pipeline.data_parallel)),
      calibration_(pipeline) {
  if (pipeline.plan().validate) predicted_ = schedule::simulate(pipeline.schedule(), pipeline.plan().costs);
}

Throughput RunReport::measured_throughput() const {
  return throughput(pipeline_.spec().model, pipeline_.spec().global_batch, comm::size_of(pipeline_.grid().world()),
                    steady_mean(step_seconds_, [](double s) { return s; }), reference_);
}

void RunReport::add_step(const StepOutcome& step, double run_start) {
  calibration_.add_step(step.step_start - run_start, step.seconds, step.result);
  losses_.push_back(step.loss);
  loss_scales_.push_back(step.result.loss_scale);
  step_seconds_.push_back(step.seconds);
  step_numbers_.push_back(step.step + 1);
  peak_stashed_ = std::max(peak_stashed_, step.result.peak_stashed);
  measured_bubbles_.push_back(step.bubble);
  if (pipeline_.grid().replicas() > 1) {
    // Exposed: what the sum adds after the last compute of every replica (waiting for a slower replica is not).
    sum_in_flight_.push_back(step.result.reduction_end - step.result.reduction_start);
    sum_exposed_.push_back(std::max(0.0, step.result.reduction_end - step.compute_end));
  }
}

nlohmann::json RunReport::loss_scale_json() const {
  const auto* update = pipeline_.update();
  if (!update || !update->loss_scaler().enabled()) return nlohmann::json();
  // Skipped steps counted from 1, as the log and "steps" count them.
  std::vector<int> skipped;
  for (const int step : update->skipped_steps()) skipped.push_back(step + 1);
  return {{"history", loss_scales_}, {"skipped_steps", skipped}};
}

double RunReport::hidden_fraction() const {
  double in_flight = 0.0, exposed = 0.0;
  for (const auto& row : rows_) {
    in_flight += row.sum_in_flight;
    exposed += row.sum_exposed;
  }
  return in_flight > 0 ? 1.0 - exposed / in_flight : 0.0;
}

void RunReport::finish(double seconds) {
  seconds_ = seconds;
  const auto& grid = pipeline_.grid();
  double stashed_bytes = 0.0;
  for (int c = 0; c < pipeline_.chunk_count(); ++c) {
    stashed_bytes += static_cast<double>(pipeline_.chunk(c).peak_stashed_bytes());
  }
  const std::vector<double> mine = {
      static_cast<double>(grid.pipeline_rank()), static_cast<double>(grid.tensor_rank()),
      static_cast<double>(grid.replica()), static_cast<double>(peak_stashed_),
      predicted_ ? static_cast<double>(predicted_->ranks[grid.pipeline_rank()].peak_stashed) : -1.0,
      stashed_bytes / (1 << 20), pipeline_.transport().bytes_sent() / double(1 << 20),
      pipeline_.memory().total() / double(1 << 20), runtime::peak_resident_bytes() / double(1 << 20),
      steady_mean(sum_in_flight_, [](double x) { return x; }), steady_mean(sum_exposed_, [](double x) { return x; }),
      // The training steps' own traffic, as kpipe plan predicts it: without the validation passes'.
      static_cast<double>(pipeline_.transport().bytes_sent() - pipeline_.validation_bytes().pipeline),
      static_cast<double>(pipeline_.collectives().bytes_contributed() + pipeline_.transport().bytes_gathered() -
                          pipeline_.validation_bytes().tensor),
      static_cast<double>(pipeline_.gradient_sync().bytes_summed() +
                          (pipeline_.shard_gather() ? pipeline_.shard_gather()->bytes_gathered() : 0)),
      static_cast<double>(pipeline_.gradient_sync().tied_bytes_summed())};
  const std::vector<double> all = comm::gather_to_root(grid.world(), mine);
  // Each rank's own; rank 0's leave the calibration and are reported.
  disturbed_ = disturbed_steps(step_seconds_);
  calibrated_ = calibration_.finish(disturbed_.steps);
  if (!log::is_root()) return;
  if (calibrated_ && predicted_) {
    recalibrated_ = schedule::predict_step(pipeline_.schedule(), *calibrated_, pipeline_.plan().costs.max_in_flight);
  }
  const int size = comm::size_of(grid.world());
  const double steps = static_cast<double>(std::max<std::size_t>(losses_.size(), 1));
  // A rank's counter over the run, per step, against the predicted bytes.
  const auto per_step = [&](double total, const model::LinkVolume& link) {
    return LinkBytes{total / steps, static_cast<double>(link.bytes)};
  };
  for (int r = 0; r < size; ++r) {
    const double* row = &all[mine.size() * static_cast<std::size_t>(r)];
    const model::StepTraffic& predicted = predicted_traffic_[static_cast<std::size_t>(row[0])];
    rows_.push_back({static_cast<int>(row[0]), static_cast<int>(row[1]), static_cast<int>(row[2]),
                     static_cast<int>(row[3]), static_cast<int>(row[4]), row[5], row[6], row[7], row[8], row[9],
                     row[10], per_step(row[11], predicted.pipeline), per_step(row[12], predicted.tensor),
                     per_step(row[13], predicted.data), per_step(row[14], predicted.tied)});
  }
}

schedule::Bubble RunReport::steady_bubble(schedule::Bubble runtime::MeasuredBubble::*which,
                                          const std::vector<std::size_t>& left_out) const {
  return {steady_mean(
              measured_bubbles_, [&](const auto& m) { return (m.*which).idle_over_useful; }, left_out),
          steady_mean(
              measured_bubbles_, [&](const auto& m) { return (m.*which).idle_over_total; }, left_out)};
}

void RunReport::print() const {
  if (!log::is_root() || losses_.empty()) return;
  const double samples_per_second =
      pipeline_.spec().global_batch / steady_mean(step_seconds_, [](double s) { return s; });
  const schedule::Bubble measured = steady_bubble(&runtime::MeasuredBubble::bubble);
  const schedule::Bubble spans = steady_bubble(&runtime::MeasuredBubble::span);
  log::info("summary: {} steps in {:.2f} s, final loss {:.6f} (first {:.6f}), {:.4g} samples/s", losses_.size(),
            seconds_, losses_.back(), losses_.front(), samples_per_second);
  log::info("throughput: {}", measured_throughput().describe());
  if (pipeline_.times_lane_split()) {
    log::info(
        "lanes split by layers in {} of {} steps, by microbatches in the rest (pipeline.lane_split = \"auto\": "
        "the faster, timed)",
        pipeline_.steps_split_by_layers(), losses_.size());
  }
  const std::string simulated =
      predicted_ ? fmt::format("simulated (deck costs) idle/useful {:.3f}, idle/total {:.3f}",
                               predicted_->bubble().idle_over_useful, predicted_->bubble().idle_over_total)
                 : std::string("no simulation (schedule not validated)");
  log::info("bubble:  measured idle/useful {:.3f}, idle/total {:.3f} | {}", measured.idle_over_useful,
            measured.idle_over_total, simulated);
  log::info("bubble within each rank's span (first compute to last): measured idle/useful {:.3f}, idle/total {:.3f}{}",
            spans.idle_over_useful, spans.idle_over_total,
            predicted_
                ? fmt::format(" | simulated idle/useful {:.3f}, idle/total {:.3f}",
                              predicted_->span_bubble().idle_over_useful, predicted_->span_bubble().idle_over_total)
                : std::string());
  if (const DisturbedSteps& disturbed = disturbed_; !disturbed.steps.empty()) {
    const schedule::Bubble undisturbed = steady_bubble(&runtime::MeasuredBubble::bubble, disturbed.steps);
    const std::size_t slowest = *std::max_element(disturbed.steps.begin(), disturbed.steps.end(),
                                                  [&](auto a, auto b) { return step_seconds_[a] < step_seconds_[b]; });
    log::info(
        "noise: {} of {} steady steps took over {:g} times their median ({:.3f} ms; step {}: {:.3f} ms), slowed "
        "from outside the run; without them, as the calibration counts, measured idle/useful {:.3f}, idle/total {:.3f}",
        disturbed.steps.size(), step_seconds_.size() - 1, disturbed_step_factor, 1e3 * disturbed.median_seconds,
        step_numbers_[slowest], 1e3 * step_seconds_[slowest], undisturbed.idle_over_useful,
        undisturbed.idle_over_total);
  }
  if (calibrated_ && recalibrated_) {
    const auto& c = *calibrated_;
    log::info(
        "calibration: step {:.3f} ms = pipeline {:.3f} ms + {:.3f} ms after it; simulated with these costs: step "
        "{:.3f} ms, bubble idle/useful {:.3f}, within spans {:.3f}, post-validated {:.3f}{} (kpipe plan --costs "
        "reads them from --json)",
        1e3 * c.step_seconds, 1e3 * c.makespan, 1e3 * c.step_overhead, 1e3 * recalibrated_->step_seconds,
        recalibrated_->bubble.idle_over_useful, recalibrated_->span_bubble.idle_over_useful,
        recalibrated_->post_validated.idle_over_useful,
        pipeline_.spec().optimizer.post_validation ? " (this run's: compare the measured bubble with it)" : "");
  }
  if (pipeline_.grid().replicas() > 1) {
    double in_flight = 0.0, exposed = 0.0;
    for (const auto& row : rows_) {
      in_flight += row.sum_in_flight / static_cast<double>(rows_.size());
      exposed += row.sum_exposed / static_cast<double>(rows_.size());
    }
    log::info(
        "gradient sum: {:.3f} ms in flight per step and rank, {:.3f} ms of it after the last compute of any rank: "
        "{:.0f}% hidden ({})",
        1e3 * in_flight, 1e3 * exposed, 100 * hidden_fraction(),
        pipeline_.overlaps_gradient_sums() ? "overlapped" : "after the last backward");
  }
  log::info("{:>6} {:>6} {:>7} {:>14} {:>15} {:>14} {:>10} {:>14} {:>13}", "stage", "tensor", "replica", "peak stashed",
            "predicted peak", "stashed MiB", "sent MiB", "estimated MiB", "peak RSS MiB");
  for (const auto& row : rows_) {
    log::info("{:>6} {:>6} {:>7} {:>14} {:>15} {:>14.2f} {:>10.2f} {:>14.1f} {:>13.1f}", row.stage, row.tensor_rank,
              row.replica, row.peak_stashed,
              row.predicted_peak_stashed < 0 ? "-" : std::to_string(row.predicted_peak_stashed), row.peak_stashed_mib,
              row.mib_sent, row.estimated_mib, row.peak_resident_mib);
  }
  log::info("communication per step and rank, bytes measured / predicted (kpipe plan):");
  const bool tied =
      std::any_of(rows_.begin(), rows_.end(), [](const RankRow& row) { return row.tied_bytes.predicted > 0; });
  log::info("{:>6} {:>6} {:>7} {:>25} {:>25} {:>25}{}", "stage", "tensor", "replica", "pipeline", "tensor group",
            "data-parallel", tied ? fmt::format(" {:>25}", "tied embedding") : "");
  for (const auto& row : rows_) {
    const auto pair = [](const LinkBytes& link) {
      return fmt::format("{:.0f} / {:.0f}", link.measured, link.predicted);
    };
    log::info("{:>6} {:>6} {:>7} {:>25} {:>25} {:>25}{}", row.stage, row.tensor_rank, row.replica,
              pair(row.pipeline_bytes), pair(row.tensor_bytes), pair(row.data_bytes),
              tied ? fmt::format(" {:>25}", pair(row.tied_bytes)) : "");
  }
  for (const auto& checkpoint : checkpoints_) {
    log::info("checkpoint: {} ({:.2f} MiB in {:.3f} s)", checkpoint["file"].get<std::string>(),
              checkpoint["mib"].get<double>(), checkpoint["seconds"].get<double>());
  }
}

nlohmann::json RunReport::json() const {
  const auto link_json = [](const LinkBytes& link) {
    return nlohmann::json{{"measured", link.measured}, {"predicted", link.predicted}};
  };
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& row : rows_) {
    ranks.push_back({{"stage", row.stage},
                     {"tensor_rank", row.tensor_rank},
                     {"replica", row.replica},
                     {"peak_stashed", row.peak_stashed},
                     {"predicted_peak_stashed",
                      row.predicted_peak_stashed < 0 ? nlohmann::json() : nlohmann::json(row.predicted_peak_stashed)},
                     {"peak_stashed_mib", row.peak_stashed_mib},
                     {"mib_sent", row.mib_sent},
                     {"estimated_memory_mib", row.estimated_mib},
                     {"peak_resident_mib", row.peak_resident_mib},
                     {"gradient_sum_in_flight_seconds", row.sum_in_flight},
                     {"gradient_sum_exposed_seconds", row.sum_exposed},
                     {"bytes_per_step",
                      {{"pipeline", link_json(row.pipeline_bytes)},
                       {"tensor", link_json(row.tensor_bytes)},
                       {"data", link_json(row.data_bytes)},
                       {"tied", link_json(row.tied_bytes)}}}});
  }
  std::vector<int> disturbed_numbers;
  for (const std::size_t i : disturbed_.steps) disturbed_numbers.push_back(step_numbers_[i]);
  const auto& s = pipeline_.schedule();
  return {
      {"schedule", s.name},
      {"p", s.p},
      {"v", s.v},
      {"m", s.m},
      {"t", pipeline_.grid().tensor_size()},
      {"d", pipeline_.grid().replicas()},
      {"steps", losses_.size()},
      {"seconds", seconds_},
      {"losses", losses_},
      {"loss_scale", loss_scale_json()},
      {"step_seconds", step_seconds_},
      {"disturbed_steps", disturbed_numbers},
      {"samples_per_second", pipeline_.spec().global_batch / steady_mean(step_seconds_, [](double x) { return x; })},
      {"throughput", measured_throughput().to_json()},
      {"bubble",
       {{"measured", to_json(steady_bubble(&runtime::MeasuredBubble::bubble))},
        {"measured_undisturbed", to_json(steady_bubble(&runtime::MeasuredBubble::bubble, disturbed_.steps))},
        {"simulated_deck_costs", predicted_ ? to_json(predicted_->bubble()) : nlohmann::json()},
        {"measured_span", to_json(steady_bubble(&runtime::MeasuredBubble::span))},
        {"simulated_deck_costs_span", predicted_ ? to_json(predicted_->span_bubble()) : nlohmann::json()}}},
      {"ranks", ranks},
      {"gradient_sum",
       pipeline_.grid().replicas() > 1
           ? nlohmann::json{{"overlapped", pipeline_.overlaps_gradient_sums()}, {"hidden_fraction", hidden_fraction()}}
           : nlohmann::json()},
      {"calibration", calibrated_ ? nlohmann::json::parse(schedule::calibration_json(*calibrated_)) : nlohmann::json()},
      {"calibrated_prediction", recalibrated_
                                    ? nlohmann::json{{"step_seconds", recalibrated_->step_seconds},
                                                     {"makespan_seconds", recalibrated_->makespan},
                                                     {"bubble", to_json(recalibrated_->bubble)},
                                                     {"span_bubble", to_json(recalibrated_->span_bubble)},
                                                     {"post_validated_bubble", to_json(recalibrated_->post_validated)}}
                                    : nlohmann::json()},
      {"checkpoints", checkpoints_},
      {"validation", validation_},
      {"restarted_from", restart_},
      // What this process resolved from the run's configuration, and how often: once each.
      {"resolution",
       {{"schedule_lookups", schedule::schedule_lookups()}, {"partitions_computed", model::partitions_computed()}}}};
}

void RunReport::add_validation(std::int64_t step, double loss) {
  validation_.push_back({{"step", step}, {"loss", loss}});
}

void RunReport::add_checkpoint(const std::string& file, std::int64_t step, double seconds, double mib) {
  checkpoints_.push_back({{"file", file}, {"step", step}, {"seconds", seconds}, {"mib", mib}});
}

void RunReport::restarted_from(const std::string& file, std::int64_t step, double seconds) {
  restart_ = {{"file", file}, {"step", step}, {"seconds", seconds}};
}

void RunReport::write_json(const std::string& path, const nlohmann::json& command) const {
  if (!log::is_root()) return;
  nlohmann::json out = json();
  out.merge_patch(command);
  write_output(path, "--json", [&](std::ostream& file) { file << out.dump(2) << '\n'; });
}

}  // namespace kpipe::runtime
