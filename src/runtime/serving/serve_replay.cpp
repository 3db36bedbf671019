#include "kpipe/runtime/serving/serve_replay.hpp"

#include <algorithm>
#include <limits>

namespace kpipe::runtime {

ReplayDriver::ReplayDriver(std::vector<Request> requests, const BatchLimits& limits)
    : requests_(std::move(requests)), scheduler_(limits) {
  for (const Request& r : requests_) {
    if (r.id >= static_cast<int>(times_.size())) times_.resize(static_cast<std::size_t>(r.id) + 1);
    times_[static_cast<std::size_t>(r.id)].arrival = r.arrival;
  }
}

double ReplayDriver::next_arrival() const {
  return arrived_ < requests_.size() ? requests_[arrived_].arrival : std::numeric_limits<double>::infinity();
}

void ReplayDriver::arrive(double now) {
  for (; arrived_ < requests_.size() && requests_[arrived_].arrival <= now; ++arrived_) {
    if (auto refusal = scheduler_.arrive(requests_[arrived_])) refusals_.push_back(std::move(*refusal));
  }
}

std::optional<schedule::MicrobatchWork> ReplayDriver::next(double) {
  const auto microbatch = scheduler_.next();
  if (!microbatch) return std::nullopt;
  samples_[microbatch->id] = static_cast<int>(std::count_if(microbatch->segments.begin(), microbatch->segments.end(),
                                                            [](const Segment& s) { return s.sample; }));
  return schedule::MicrobatchWork{microbatch->id, static_cast<int>(microbatch->tokens.size()),
                                  attended_positions(*microbatch)};
}

void ReplayDriver::complete(int id, double now) {
  const int samples = samples_.at(id);
  samples_.erase(id);
  for (const TokenEvent& event : scheduler_.complete(id, std::vector<int>(static_cast<std::size_t>(samples), 0))) {
    RequestTimes& t = times_[static_cast<std::size_t>(event.request)];
    if (t.first_token < 0.0) t.first_token = now;
    if (event.finished) t.finished = now;
  }
}

}  // namespace kpipe::runtime
