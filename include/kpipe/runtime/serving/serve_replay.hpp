#pragma once
// A request trace replayed through the batching scheduler in simulated time:
// the driver schedule::simulate_serving runs, so a deck's batching policy can
// be judged (makespan, bubble, time to first token) before, or next to,
// `kpipe serve`. The simulated last stage samples token 0: what a
// microbatch holds depends on token counts, never on token values.

#include <map>
#include <string>
#include <vector>

#include "kpipe/runtime/serving/serve_scheduler.hpp"
#include "kpipe/schedule/serve_simulate.hpp"

namespace kpipe::runtime {

// When a request was served, in the simulation's time.
struct RequestTimes {
  double arrival = 0.0;
  double first_token = -1.0;  // -1: none yet (or refused)
  double finished = -1.0;
};

class ReplayDriver final : public schedule::ServeDriver {
 public:
  // `requests` in arrival order (a Trace's).
  ReplayDriver(std::vector<Request> requests, const BatchLimits& limits);

  double next_arrival() const override;
  void arrive(double now) override;
  std::optional<schedule::MicrobatchWork> next(double now) override;
  void complete(int id, double now) override;
  bool finished() const override { return arrived_ == requests_.size() && scheduler_.idle(); }

  const std::vector<RequestTimes>& times() const { return times_; }  // by request id
  const std::vector<std::string>& refusals() const { return refusals_; }

 private:
  std::vector<Request> requests_;
  BatchScheduler scheduler_;
  std::size_t arrived_ = 0;
  std::map<int, int> samples_;  // microbatch in flight -> tokens it samples
  std::vector<RequestTimes> times_;
  std::vector<std::string> refusals_;
};

}  // namespace kpipe::runtime
