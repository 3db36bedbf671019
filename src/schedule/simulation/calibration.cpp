#include "kpipe/schedule/calibration.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "kpipe/core/error.hpp"

namespace kpipe::schedule {

namespace {

constexpr double smallest_cost = 1e-9;  // seconds: the simulator takes positive compute costs only
constexpr int max_simulations = 64;

}  // namespace

std::vector<double> spread_factors(std::vector<double> values) {
  if (values.empty()) return {};
  const double m = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  if (!(m > 0.0)) return {};
  std::sort(values.begin(), values.end());
  // Each factor is the mean of one equal share of the sorted values, not a
  // single order statistic: a sample of mostly zeros and a few waits keeps
  // its mean (single quantiles could all be 0) and the factors never divide
  // 0 by 0. With fewer values than factors a share is the nearest value.
  const std::size_t n = values.size();
  std::vector<double> q;
  for (std::size_t i = 0; i < spread_quantiles; ++i) {
    const std::size_t lo = std::min(i * n / spread_quantiles, n - 1);
    const std::size_t hi = std::max(lo + 1, (i + 1) * n / spread_quantiles);
    q.push_back(std::accumulate(values.begin() + lo, values.begin() + hi, 0.0) / (hi - lo) / m);
  }
  // Rescaled to mean 1, so the spread moves no mean cost.
  const double qm = std::accumulate(q.begin(), q.end(), 0.0) / q.size();
  for (double& x : q) x /= qm;
  return q;
}

namespace {

double mean(const std::vector<double>& values) {
  return values.empty() ? 0.0 : std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

// A message: (receiver, sender, tag, direction).
using MessageKey = std::tuple<int, int, int, int>;

// When a message's send ended, and when its receive began and ended.
struct Message {
  double sent = 0.0, start = 0.0, end = 0.0;
};

// A receive that began once its message was ready measures the receive
// itself; one that waited measures the link, from the send's end, plus the
// receive. "Ready" needs the link's latency, so the split is made twice:
// first against the send's end, then against it plus the latency found.
// Means, not medians: a step's length adds the delays up, slow ones included.
void split_receives(const std::vector<Message>& messages, Calibration& c) {
  double latency = 0.0;
  std::vector<double> ready, waited;
  for (int pass = 0; pass < 2; ++pass) {
    ready.clear();
    waited.clear();
    for (const Message& m : messages) {
      if (m.start >= m.sent + latency) {
        ready.push_back(m.end - m.start);
      } else {
        waited.push_back(m.end - m.sent);
      }
    }
    c.receive_seconds = mean(ready);
    latency = waited.empty() ? 0.0 : std::max(0.0, mean(waited) - c.receive_seconds);
  }
  c.link_latency = latency;
  c.receive_spread = spread_factors(ready);
  for (double& w : waited) w = std::max(0.0, w - c.receive_seconds);
  c.transfer_spread = spread_factors(waited);
}

}  // namespace

Calibration measure_calibration(const std::vector<Timeline>& steps, int microbatch_size, double step_seconds,
                                std::int64_t bytes_per_transfer) {
  if (steps.empty()) throw input_error("no steady step was measured to calibrate from; run at least 2 steps");
  Calibration c;
  c.p = steps.front().p;
  c.v = steps.front().v;
  c.microbatch_size = microbatch_size;
  c.bytes_per_transfer = bytes_per_transfer;
  const std::size_t stages = static_cast<std::size_t>(c.p) * c.v;
  std::vector<std::array<double, 4>> seconds(stages, {0, 0, 0, 0}), counts(stages, {0, 0, 0, 0});
  std::vector<double> sends;
  std::vector<Message> messages;
  std::vector<std::array<std::vector<double>, 4>> durations(stages);  // F (without LOSS), B, W, BW
  std::vector<double> optimizer(static_cast<std::size_t>(c.p), 0.0);  // per rank, over all steps
  for (Timeline step : steps) {
    summarize(step);
    c.makespan += step.makespan;
    c.bubble.idle_over_useful += step.bubble.idle_over_useful;
    c.bubble.idle_over_total += step.bubble.idle_over_total;
    std::map<MessageKey, double> sent;  // when each message's send ended
    for (int r = 0; r < step.p; ++r) {
      for (const TimedAction& t : step.ranks[r]) {
        const ActionKind kind = t.action.kind;
        if (const int slot = compute_slot(kind); slot >= 0 && t.stage >= 0 && t.stage < static_cast<int>(stages)) {
          seconds[t.stage][slot] += t.end - t.start;
          if (kind != ActionKind::loss) {
            counts[t.stage][slot] += 1;
            durations[t.stage][slot].push_back(t.end - t.start);
          }
        } else if (is_step_level(kind)) {
          optimizer[r] += t.end - t.start;
        } else if (is_send(kind)) {
          sends.push_back(t.end - t.start);
          sent[{t.action.peer, r, t.action.tag, static_cast<int>(direction_of(kind))}] = t.end;
        }
      }
    }
    for (int r = 0; r < step.p; ++r) {
      for (const TimedAction& t : step.ranks[r]) {
        if (!is_receive(t.action.kind)) continue;
        const auto found = sent.find({r, t.action.peer, t.action.tag, static_cast<int>(direction_of(t.action.kind))});
        if (found != sent.end()) messages.push_back({found->second, t.start, t.end});
      }
    }
  }
  const double n = static_cast<double>(steps.size());
  c.makespan /= n;
  c.bubble.idle_over_useful /= n;
  c.bubble.idle_over_total /= n;
  c.step_seconds = step_seconds;
  c.step_overhead = std::max(0.0, step_seconds - c.makespan);
  c.optimizer_seconds = *std::max_element(optimizer.begin(), optimizer.end()) / n;
  for (std::size_t s = 0; s < stages; ++s) {
    const auto per = [&](int k) { return counts[s][k] > 0 ? seconds[s][k] / counts[s][k] : 0.0; };
    const double half_bw = per(3) / 2;
    c.stages.push_back({per(0), counts[s][1] > 0 ? per(1) : half_bw, counts[s][2] > 0 ? per(2) : half_bw});
  }
  c.send_seconds = mean(sends);
  split_receives(messages, c);
  // Each compute time as a factor of its (stage, kind) mean, pooled.
  std::vector<double> factors;
  for (const auto& stage : durations) {
    for (const auto& kind : stage) {
      const double m = mean(kind);
      if (m > 0.0) {
        for (double d : kind) factors.push_back(d / m);
      }
    }
  }
  c.compute_spread = spread_factors(factors);
  return c;
}

CostModel cost_model(const Calibration& calibration, int max_in_flight) {
  CostModel costs;
  for (StageCosts stage : calibration.stages) {
    for (double* cost : {&stage.forward, &stage.backward_input, &stage.backward_weight}) {
      *cost = std::max(*cost, smallest_cost);
    }
    costs.stages.push_back(stage);
  }
  if (!costs.stages.empty()) {
    costs.forward = costs.stages.front().forward;
    costs.backward_input = costs.stages.front().backward_input;
    costs.backward_weight = costs.stages.front().backward_weight;
  }
  costs.comm_latency = calibration.link_latency;
  costs.comm_bandwidth = calibration.link_bandwidth;
  costs.bytes_per_transfer = calibration.bytes_per_transfer;
  costs.send_time = calibration.send_seconds;
  costs.receive_time = calibration.receive_seconds;
  costs.max_in_flight = max_in_flight;
  if (!calibration.compute_spread.empty() || !calibration.transfer_spread.empty() ||
      !calibration.receive_spread.empty()) {
    costs.variation = Variation{calibration.compute_spread, calibration.transfer_spread, calibration.receive_spread, 1};
  }
  return costs;
}

CalibratedStep predict_step(const Schedule& schedule, const Calibration& calibration, int max_in_flight) {
  CostModel costs = cost_model(calibration, max_in_flight);
  // Enough simulations for a stable mean, fewer on huge plans (each is one pass over every action).
  constexpr double actions_budget = 2e7;
  const int simulations =
      costs.variation ? static_cast<int>(std::clamp(actions_budget / std::max<std::size_t>(1, schedule.action_count()),
                                                    1.0, static_cast<double>(max_simulations)))
                      : 1;
  CalibratedStep step;
  step.simulations = simulations;
  for (int i = 0; i < simulations; ++i) {
    if (costs.variation) costs.variation->seed = static_cast<std::uint64_t>(i) + 1;
    const SimulationResult r = simulate(schedule, costs, Record::summary);
    // Counted as a measured step is: busy compute over p ranks until the last compute ends.
    const double span = r.last_compute_end;
    const double idle = schedule.p * span - r.total_busy;
    step.makespan += span / simulations;
    step.bubble.idle_over_useful += (r.total_busy > 0.0 ? idle / r.total_busy : 0.0) / simulations;
    step.bubble.idle_over_total += (span > 0.0 ? idle / (schedule.p * span) : 0.0) / simulations;
    const Bubble within = r.span_bubble();
    step.span_bubble.idle_over_useful += within.idle_over_useful / simulations;
    step.span_bubble.idle_over_total += within.idle_over_total / simulations;
  }
  // Steps without a barrier, in their steady state at the mean costs: each
  // rank's optimizer now runs inside its period.
  if (schedule.training()) {
    costs.variation.reset();
    costs.optimizer_step = calibration.optimizer_seconds;
    step.post_validated = post_validated_bubble(schedule, costs);
  }
  // The overhead was measured from the last compute, as the measured makespan ends there.
  step.step_seconds = step.makespan + calibration.step_overhead;
  return step;
}

}  // namespace kpipe::schedule
