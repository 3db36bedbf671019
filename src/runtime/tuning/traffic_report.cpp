#include "kpipe/runtime/tuning/traffic_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"

namespace kpipe::runtime {

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
  const schedule::Placement& placement = schedule.placement;
  std::vector<model::StepTraffic> ranks;
  for (int rank = 0; rank < schedule.p; ++rank) {
    std::vector<model::StageTraffic> held;
    for (int chunk = 0; chunk < schedule.v; ++chunk) held.push_back(traffic[placement.stage(rank, chunk)]);
    // A boundary between two stages of this rank (the turn of a V) sends no
    // message either way and gathers nothing.
    for (int chunk = 0; chunk < schedule.v; ++chunk) {
      const int stage = placement.stage(rank, chunk);
      if (stage + 1 >= placement.stage_count() || placement.place(stage + 1).rank != rank) continue;
      const model::LinkVolume message{traffic[stage].output_share_bytes, 1};
      for (const int end : {chunk, placement.place(stage + 1).chunk}) {
        model::StageTraffic& side = held[static_cast<std::size_t>(end)];
        side.pipeline += message.times(-1);
        if (side.boundary_gather.calls > 0) side.boundary_gather += message.times(-1);
      }
    }
    std::vector<const model::StageTraffic*> mine;
    for (const model::StageTraffic& stage : held) mine.push_back(&stage);
    ranks.push_back(model::step_traffic(mine, schedule.m, data_parallel));
  }
  return ranks;
}

double link_time(const model::LinkVolume& link, const config::SimConfig& sim) {
  const double transfer = sim.comm_bandwidth > 0.0 ? static_cast<double>(link.bytes) / sim.comm_bandwidth : 0.0;
  return static_cast<double>(link.calls) * sim.comm_latency + transfer;
}

std::string describe(const model::StepTraffic& step, const config::SimConfig& sim) {
  return fmt::format("{}, {}, {}{}", describe("pipeline", step.pipeline, "messages", sim),
                     describe("tensor", step.tensor, "collectives", sim), describe("data", step.data, "sums", sim),
                     step.tied.calls > 0 ? ", " + describe("tied embedding", step.tied, "sums", sim) : "");
}

nlohmann::json traffic_json(const model::StepTraffic& step, const config::SimConfig& sim) {
  return {{"pipeline", link_json(step.pipeline, sim)},
          {"tensor", link_json(step.tensor, sim)},
          {"data", link_json(step.data, sim)},
          {"tied", link_json(step.tied, sim)}};
}

void log_traffic(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                 const schedule::Schedule& schedule) {
  const int parts = model::boundary_parts(config.pipeline);
  const int boundaries = static_cast<int>(stages.size()) - 1;
  for (int s = 0; s < std::min(boundaries, limits::listed_ranks); ++s) {
    const std::int64_t whole = stages[s].output_bytes;
    const char* why = model::boundary_gathered(config.pipeline) ? "scatter/gather" : "sequence-parallel rows";
    log::info("boundary {} -> {}: {} bytes per microbatch and rank{}", s, s + 1, whole / parts,
              parts > 1 ? fmt::format(" (1/{} of {}: {})", parts, whole, why) : std::string());
  }
  if (boundaries > limits::listed_ranks) log::info("... and {} boundaries more", boundaries - limits::listed_ranks);
  const auto ranks = runtime::predicted_traffic(stages, schedule, config.pipeline.data_parallel);
  const auto total = [](const model::StepTraffic& r) {
    return r.pipeline.bytes + r.tensor.bytes + r.data.bytes + r.tied.bytes;
  };
  if (schedule.p > limits::listed_ranks) {
    const auto most =
        std::max_element(ranks.begin(), ranks.end(), [&](const auto& a, const auto& b) { return total(a) < total(b); });
    log::info("communication per step, most (pipeline rank {}): {}", most - ranks.begin(), describe(*most, config.sim));
    return;
  }
  for (int rank = 0; rank < schedule.p; ++rank) {
    log::info("communication per step, pipeline rank {}: {}", rank, describe(ranks[rank], config.sim));
  }
}

nlohmann::json plan_traffic_json(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                                 const schedule::Schedule& schedule) {
  const auto& shape = config.pipeline;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : runtime::predicted_traffic(stages, schedule, shape.data_parallel)) {
    ranks.push_back(traffic_json(rank, config.sim));
  }
  nlohmann::json boundaries = nlohmann::json::array();
  for (std::size_t s = 0; s + 1 < stages.size(); ++s) boundaries.push_back(stages[s].output_bytes);
  return {{"grid",
           {{"p", shape.stages},
            {"t", shape.tensor_parallel},
            {"d", shape.data_parallel},
            {"world", shape.world_size()},
            {"scatter_gather", model::boundary_gathered(shape)}}},
          {"boundary_bytes", boundaries},
          {"ranks", ranks}};
}

}  // namespace kpipe::runtime
