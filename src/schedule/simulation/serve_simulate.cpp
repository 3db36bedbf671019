#include "kpipe/schedule/serve_simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kpipe/core/error.hpp"

namespace kpipe::schedule {

namespace {

constexpr double never = std::numeric_limits<double>::infinity();

class ServeRun {
 public:
  ServeRun(const ServeSetup& setup, ServeDriver& driver)
      : setup_(setup),
        driver_(driver),
        p_(static_cast<int>(setup.stages.size())),
        limit_(setup.max_in_flight > 0 ? setup.max_in_flight : p_),
        free_(setup.stages.size(), 0.0) {}

  ServeSimulation run() {
    double now = 0.0;
    for (;;) {
      complete_until(now);
      driver_.arrive(now);
      if (driver_.next_arrival() <= now) {
        throw runtime_error(fmt::format("serving simulation: the driver still has arrivals at time {}", now));
      }
      const bool can_start = static_cast<int>(flight_.size()) < limit_;
      if (can_start && free_[0] <= now) {
        if (auto work = driver_.next(now)) {
          launch(*work, now);
          continue;
        }
      }
      double next = driver_.next_arrival();
      for (const std::size_t i : flight_) next = std::min(next, microbatches_[i].completed);
      if (can_start && free_[0] > now) next = std::min(next, free_[0]);
      if (next == never) break;
      now = next;
    }
    if (!driver_.finished()) {
      throw runtime_error(fmt::format(
          "serving simulation: at time {} nothing runs, nothing arrives, but the driver is not finished", now));
    }
    return summarize_serving(std::move(microbatches_), p_);
  }

 private:
  // Microbatches whose tokens are back by `now`, earliest first.
  void complete_until(double now) {
    for (;;) {
      const auto it = std::min_element(flight_.begin(), flight_.end(), [&](std::size_t a, std::size_t b) {
        return microbatches_[a].completed < microbatches_[b].completed;
      });
      if (it == flight_.end() || microbatches_[*it].completed > now) return;
      const ServedMicrobatch& done = microbatches_[*it];
      flight_.erase(it);
      driver_.complete(done.work.id, done.completed);
    }
  }

  // Every stage runs microbatches in the order they were formed, so a new
  // one's times are known when it starts.
  void launch(const MicrobatchWork& work, double now) {
    ServedMicrobatch m{work, {}, {}, 0.0};
    double ready = now;
    for (int s = 0; s < p_; ++s) {
      const double start = std::max(ready, free_[s]);
      const double end = start + std::max(0.0, setup_.stages[s].at(work.tokens, work.attended));
      m.start.push_back(start);
      m.end.push_back(end);
      free_[s] = end;
      ready = end + setup_.transfer;
    }
    m.completed = p_ > 1 ? ready : m.end.back();
    flight_.push_back(microbatches_.size());
    microbatches_.push_back(std::move(m));
  }

  const ServeSetup& setup_;
  ServeDriver& driver_;
  int p_;
  int limit_;
  std::vector<double> free_;         // when each stage finishes its last microbatch
  std::vector<std::size_t> flight_;  // indices of the microbatches in flight
  std::vector<ServedMicrobatch> microbatches_;
};

}  // namespace

ServeSimulation summarize_serving(std::vector<ServedMicrobatch> microbatches, int stages) {
  ServeSimulation result;
  result.stages.assign(static_cast<std::size_t>(stages), {0.0, never, 0.0});
  for (const ServedMicrobatch& m : microbatches) {
    for (int s = 0; s < stages; ++s) {
      ServeStageStats& stats = result.stages[static_cast<std::size_t>(s)];
      stats.busy += m.end[static_cast<std::size_t>(s)] - m.start[static_cast<std::size_t>(s)];
      stats.first_start = std::min(stats.first_start, m.start[static_cast<std::size_t>(s)]);
      stats.last_end = std::max(stats.last_end, m.end[static_cast<std::size_t>(s)]);
    }
    result.makespan = std::max(result.makespan, m.completed);
  }
  for (ServeStageStats& stats : result.stages) {
    if (stats.first_start == never) stats.first_start = 0.0;  // a stage that never ran
    result.total_busy += stats.busy;
    result.total_idle += stats.idle();
  }
  result.microbatches = std::move(microbatches);
  return result;
}

Bubble ServeSimulation::pipeline_bubble() const {
  if (stages.empty() || total_busy <= 0.0) return {};
  double first = stages.front().first_start, last = 0.0;
  for (const ServeStageStats& stats : stages) {
    first = std::min(first, stats.first_start);
    last = std::max(last, stats.last_end);
  }
  const double window = static_cast<double>(stages.size()) * (last - first);
  return {(window - total_busy) / total_busy, (window - total_busy) / window};
}

ServeSimulation simulate_serving(const ServeSetup& setup, ServeDriver& driver) {
  if (setup.stages.empty()) throw runtime_error("simulate_serving: no stage to run on");
  return ServeRun(setup, driver).run();
}

Timeline serve_timeline(const ServeSimulation& simulation, const std::string& name, const std::string& unit) {
  Timeline timeline;
  timeline.name = name;
  timeline.p = static_cast<int>(simulation.stages.size());
  timeline.m = static_cast<int>(simulation.microbatches.size());
  timeline.unit = unit;
  timeline.ranks.resize(simulation.stages.size());
  for (const ServedMicrobatch& m : simulation.microbatches) {
    for (int s = 0; s < timeline.p; ++s) {
      timeline.ranks[s].push_back({compute_action(ActionKind::forward, m.work.id, 0), s, -1, m.start[s], m.end[s]});
    }
  }
  timeline.makespan = simulation.makespan;
  timeline.bubble = simulation.pipeline_bubble();
  return timeline;
}

}  // namespace kpipe::schedule
