#include "kpipe/schedule/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "execution.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::schedule {

namespace {

// comm_latency per call + bytes / comm_bandwidth (no bandwidth term when 0).
double link_time(const CostModel& costs, int calls, std::int64_t bytes) {
  const double transfer = costs.comm_bandwidth > 0.0 ? static_cast<double>(bytes) / costs.comm_bandwidth : 0.0;
  return calls * costs.comm_latency + transfer;
}

// The tensor group's sums of one F, B, W or BW of a model stage.
double sums_time(const CostModel& costs, ActionKind kind, int stage) {
  if (costs.communication.empty()) return 0.0;
  const StageCommunication& c = costs.communication[static_cast<std::size_t>(stage)];
  switch (kind) {
    case ActionKind::forward:
      return link_time(costs, c.forward_sums, c.forward_sum_bytes);
    case ActionKind::backward_input:
    case ActionKind::backward:
      return link_time(costs, c.backward_sums, c.backward_sum_bytes);
    default:
      return 0.0;
  }
}

// The boundary a message crosses: an activation the one after its stage, a gradient the one before.
std::size_t boundary_of(ActionKind kind, int stage) {
  return static_cast<std::size_t>(kind == ActionKind::send_act ? stage : stage - 1);
}

}  // namespace

double CostModel::compute_time(ActionKind kind, int stage) const {
  const StageCosts c = stages.empty() ? StageCosts{forward, backward_input, backward_weight, overlap}
                                      : stages[static_cast<std::size_t>(stage)];
  const double sums = sums_time(*this, kind, stage);
  switch (kind) {
    case ActionKind::forward:
      return c.forward + sums;
    case ActionKind::backward_input:
      return c.backward_input + sums;
    case ActionKind::backward_weight:
      return c.backward_weight;
    case ActionKind::backward:
      return c.backward_input + c.backward_weight + sums;
    default:
      return 0.0;
  }
}

double CostModel::overlapped_time(const Placement& placement, int rank, const Action& overlapped) const {
  const Action f = forward_half(overlapped), bw = backward_half(overlapped);
  const int stage = placement.stage(rank, f.chunk);
  const double hidden = stages.empty() ? overlap : stages[static_cast<std::size_t>(stage)].overlap;
  const double forward_time = compute_time(f.kind, stage);
  const double backward_time = compute_time(bw.kind, placement.stage(rank, bw.chunk));
  return forward_time + backward_time - hidden * std::min(forward_time, backward_time);
}

std::int64_t CostModel::message_bytes(ActionKind kind, int stage) const {
  return communication.empty() ? bytes_per_transfer : communication[boundary_of(kind, stage)].output_bytes;
}

double CostModel::transfer_time(ActionKind kind, int stage) const {
  const double link = link_time(*this, 1, message_bytes(kind, stage));
  // Scatter/gather: the receiver's all-gather of the shares, one more collective of as many bytes.
  const bool gathered = !communication.empty() && communication[boundary_of(kind, stage)].gathered;
  return gathered ? 2 * link : link;
}

namespace {

// `which` names the costs in the message: "" or " of model stage 3".
void check_compute_costs(const StageCosts& c, const std::string& which) {
  const auto positive = [](double x) { return std::isfinite(x) && x > 0.0; };
  if (!positive(c.forward) || !positive(c.backward_input) || !positive(c.backward_weight)) {
    throw input_error(fmt::format("simulated costs{} must be > 0, but F = {}, B = {}, W = {}", which, c.forward,
                                  c.backward_input, c.backward_weight));
  }
  if (!(c.overlap >= 0.0 && c.overlap <= 1.0)) {
    throw input_error(fmt::format("the F&B overlap{} must be 0 to 1, but it is {}", which, c.overlap));
  }
}

void check_costs(const CostModel& costs, const Schedule& schedule) {
  check_compute_costs({costs.forward, costs.backward_input, costs.backward_weight, costs.overlap}, "");
  if (!(costs.comm_latency >= 0.0) || !(costs.comm_bandwidth >= 0.0) || costs.bytes_per_transfer < 0 ||
      !std::isfinite(costs.comm_latency) || !std::isfinite(costs.comm_bandwidth)) {
    throw input_error(fmt::format("communication costs must be >= 0, but latency = {}, bandwidth = {}, bytes = {}",
                                  costs.comm_latency, costs.comm_bandwidth, costs.bytes_per_transfer));
  }
  if (!(costs.send_time >= 0.0) || !(costs.receive_time >= 0.0) || !std::isfinite(costs.send_time) ||
      !std::isfinite(costs.receive_time)) {
    throw input_error(fmt::format("per-message costs must be >= 0, but send = {}, receive = {}", costs.send_time,
                                  costs.receive_time));
  }
  if (costs.variation) {
    for (const auto* factors : {&costs.variation->compute, &costs.variation->transfer, &costs.variation->receive}) {
      for (double x : *factors) {
        if (!std::isfinite(x) || x < 0.0) {
          throw input_error(fmt::format("measured cost factors must be finite and >= 0, but one is {}", x));
        }
      }
    }
  }
  const std::size_t stages = static_cast<std::size_t>(schedule.p) * schedule.v;
  if (!costs.stages.empty() && costs.stages.size() != stages) {
    throw input_error(
        fmt::format("the cost model has costs for {} model stages, but p·v = {} model stages need one each",
                    costs.stages.size(), stages));
  }
  for (std::size_t s = 0; s < costs.stages.size(); ++s) {
    check_compute_costs(costs.stages[s], fmt::format(" of model stage {}", s));
  }
  if (!costs.communication.empty() && costs.communication.size() != stages) {
    throw input_error(
        fmt::format("the cost model has communication for {} model stages, but p·v = {} model stages need one each",
                    costs.communication.size(), stages));
  }
}

int peak_stashed(const Schedule& schedule, int rank, const CostModel& costs) {
  const auto& actions = schedule.ranks[rank];
  const StashPeak stash = peak_stash(actions, costs.max_in_flight);
  if (stash.first_over_limit < actions.size()) {
    const std::size_t i = stash.first_over_limit;
    throw input_error(
        fmt::format("rank {}, action {} ({}) would hold {} stashed microbatches, more than the "
                    "limit of {} (sim.max_in_flight); raise the limit or use a schedule with "
                    "fewer microbatches in flight (1f1b holds at most p - r)",
                    rank, i, describe(actions[i]), costs.max_in_flight + 1, costs.max_in_flight));
  }
  return stash.peak;
}

// The time of F, B, W and BW per (rank, chunk), so that the event loop does no
// cost-model lookups.
class ComputeTimes {
 public:
  ComputeTimes(const Schedule& schedule, const CostModel& costs)
      : v_(schedule.v), times_(static_cast<std::size_t>(schedule.p) * schedule.v * kinds) {
    for (int r = 0; r < schedule.p; ++r) {
      for (int c = 0; c < schedule.v; ++c) {
        for (int k = 0; k < kinds; ++k) {
          times_[index(r, c, k)] = costs.compute_time(static_cast<ActionKind>(k), schedule.placement.stage(r, c));
        }
      }
    }
  }
  // F, B, W or BW; an F&B's time is CostModel::overlapped_time.
  double operator()(int rank, const Action& a) const { return times_[index(rank, a.chunk, static_cast<int>(a.kind))]; }

 private:
  static constexpr int kinds = 4;  // F, B, W, BW: the compute kinds come first in ActionKind
  std::size_t index(int rank, int chunk, int kind) const {
    return (static_cast<std::size_t>(rank) * v_ + chunk) * kinds + kind;
  }
  int v_;
  std::vector<double> times_;
};

// Draws factors of a Variation: a split-mix generator, so that a seed gives
// the same simulation on every platform.
class Draws {
 public:
  explicit Draws(const std::optional<Variation>& variation)
      : variation_(variation ? &*variation : nullptr), state_(variation ? variation->seed : 0) {}
  double compute() { return pick(variation_ ? &variation_->compute : nullptr); }
  double transfer() { return pick(variation_ ? &variation_->transfer : nullptr); }
  double receive() { return pick(variation_ ? &variation_->receive : nullptr); }

 private:
  double pick(const std::vector<double>* factors) {
    if (!factors || factors->empty()) return 1.0;
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (*factors)[z % factors->size()];
  }
  const Variation* variation_;
  std::uint64_t state_;
};

}  // namespace

SimulationResult simulate(const Schedule& schedule, const CostModel& costs, Record record, int steps) {
  check_costs(costs, schedule);
  if (steps < 1 || (steps > 1 && !schedule.training())) {
    throw std::invalid_argument(
        fmt::format("simulate: {} steps of a {} schedule; steps run back to back only in training", steps,
                    schedule.training() ? "training" : "forward-only"));
  }
  SimulationResult result;
  result.ranks.resize(schedule.p);
  result.step_end.resize(schedule.p);
  const bool every_action = record == Record::every_action;
  if (every_action) result.end.resize(schedule.p);
  for (int r = 0; r < schedule.p; ++r) {
    result.ranks[r].peak_stashed = peak_stashed(schedule, r, costs);
    result.ranks[r].peak_held = peak_held(schedule.ranks[r]);
    result.step_end[r].reserve(static_cast<std::size_t>(steps));
    if (every_action) result.end[r].reserve(schedule.ranks[r].size() * steps);
  }

  const ComputeTimes compute_time(schedule, costs);
  Draws draw(costs.variation);
  std::vector<double> clock(schedule.p, 0.0);
  std::vector<double> first_compute(schedule.p, -1.0), last_compute(schedule.p, 0.0);
  detail::Execution<double> execution(schedule, steps);
  execution.run([&](int rank, std::size_t index, const Action& a, double arrival) {
    double& now = clock[rank];
    double sent = 0.0;
    if (is_compute(a.kind)) {
      const double cost = a.kind == ActionKind::forward_backward ? costs.overlapped_time(schedule.placement, rank, a)
                                                                 : compute_time(rank, a);
      const double time = cost * draw.compute();
      if (first_compute[rank] < 0.0) first_compute[rank] = now;
      now += time;
      last_compute[rank] = now;
      result.ranks[rank].busy += time;
      result.last_compute_end = std::max(result.last_compute_end, now);
    } else if (is_receive(a.kind)) {
      now = std::max(now, arrival) + costs.receive_time * draw.receive();
    } else if (a.kind == ActionKind::optimizer_step) {
      now += costs.optimizer_step;
    } else if (is_send(a.kind)) {
      const int stage = schedule.placement.stage(rank, a.chunk);
      now += costs.send_time;
      sent = now + costs.transfer_time(a.kind, stage) * draw.transfer();
      result.ranks[rank].bytes_sent += costs.message_bytes(a.kind, stage);
      ++result.transfers;
    }
    // Each rank's actions are visited in list order: index i is end[rank].size().
    if (every_action) result.end[rank].push_back(now);
    auto& step_end = result.step_end[rank];
    if (index + 1 == (step_end.size() + 1) * schedule.ranks[rank].size()) step_end.push_back(now);
    return sent;
  });
  if (auto problem = execution.problem()) {
    throw input_error(fmt::format("invalid {} schedule: {}", schedule.name, problem->message));
  }

  result.makespan = *std::max_element(clock.begin(), clock.end());
  for (int r = 0; r < schedule.p; ++r) {
    RankStats& rank = result.ranks[r];
    rank.idle = result.makespan - rank.busy;
    rank.span = first_compute[r] < 0.0 ? 0.0 : last_compute[r] - first_compute[r];
    result.total_busy += rank.busy;
    result.total_idle += rank.idle;
    result.bytes_moved += rank.bytes_sent;
  }
  return result;
}

}  // namespace kpipe::schedule
