#pragma once
// The communication volume per link that `kpipe plan` predicts and `kpipe
// run` prints next to what its ranks counted (model::stage_traffic), per
// pipeline rank and training step.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/traffic.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

// Each pipeline rank's volume per step from its model stages' `traffic`.
// Index: pipeline rank; every tensor rank and replica of it moves the same.
std::vector<model::StepTraffic> predicted_traffic(const std::vector<model::StageTraffic>& traffic,
                                                  const schedule::Schedule& schedule, int data_parallel);

// sim.comm_latency per call + bytes / sim.comm_bandwidth (no bandwidth term when 0).
double link_time(const model::LinkVolume& link, const config::SimConfig& sim);

// "pipeline 1.50 MiB in 16 messages (time 16), tensor ..., data ...".
std::string describe(const model::StepTraffic& step, const config::SimConfig& sim);

// {"pipeline": {"bytes", "calls", "time"}, "tensor": ..., "data": ...}.
nlohmann::json traffic_json(const model::StepTraffic& step, const config::SimConfig& sim);

// `kpipe plan`'s traffic lines: the bytes each rank sends across every stage
// boundary per microbatch, and each pipeline rank's volume per step and link
// (the same for its tensor ranks and replicas), with its time at
// sim.comm_latency and sim.comm_bandwidth; with many ranks, the first
// boundaries and the rank that moves the most.
void log_traffic(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                 const schedule::Schedule& schedule);

// The same for `kpipe plan --json`: the grid, each boundary's bytes and each
// pipeline rank's volume.
nlohmann::json plan_traffic_json(const config::RunConfig& config, const std::vector<model::StageTraffic>& stages,
                                 const schedule::Schedule& schedule);

}  // namespace kpipe::runtime
