#include "traffic_report.hpp"

#include <fmt/format.h>

namespace kpipe::app {

namespace {

std::string describe(const char* name, const model::LinkVolume& link, const char* calls, const config::SimConfig& sim) {
  return fmt::format("{} {:.3f} MiB in {} {} (time {:.4g})", name, static_cast<double>(link.bytes) / (1 << 20),
                     link.calls, calls, link_time(link, sim));
}

nlohmann::json link_json(const model::LinkVolume& link, const config::SimConfig& sim) {
  return {{"bytes", link.bytes}, {"calls", link.calls}, {"time", link_time(link, sim)}};
}

}  // namespace

std::vector<model::StepTraffic> predicted_traffic(const std::vector<model::StageTraffic>& traffic,
                                                  const schedule::Schedule& schedule, int data_parallel) {
  std::vector<model::StepTraffic> ranks;
  for (int rank = 0; rank < schedule.p; ++rank) {
    std::vector<const model::StageTraffic*> mine;
    for (int chunk = 0; chunk < schedule.v; ++chunk) mine.push_back(&traffic[schedule.placement.stage(rank, chunk)]);
    ranks.push_back(model::step_traffic(mine, schedule.m, data_parallel));
  }
  return ranks;
}

double link_time(const model::LinkVolume& link, const config::SimConfig& sim) {
  const double transfer = sim.comm_bandwidth > 0.0 ? static_cast<double>(link.bytes) / sim.comm_bandwidth : 0.0;
  return static_cast<double>(link.calls) * sim.comm_latency + transfer;
}

std::string describe(const model::StepTraffic& step, const config::SimConfig& sim) {
  return fmt::format("{}, {}, {}", describe("pipeline", step.pipeline, "messages", sim),
                     describe("tensor", step.tensor, "collectives", sim), describe("data", step.data, "sums", sim));
}

nlohmann::json traffic_json(const model::StepTraffic& step, const config::SimConfig& sim) {
  return {{"pipeline", link_json(step.pipeline, sim)},
          {"tensor", link_json(step.tensor, sim)},
          {"data", link_json(step.data, sim)}};
}

}  // namespace kpipe::app
