#include "kpipe/runtime/execution/timed_choice.hpp"

#include <algorithm>
#include <stdexcept>

namespace kpipe::runtime {

namespace {

double median(std::vector<double> times) {
  const auto middle = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

}  // namespace

TimedChoice::TimedChoice(int probe, int period)
    : probe_(static_cast<std::size_t>(probe)), period_(period), left_(probe) {
  if (probe < 1 || period < 1) throw std::invalid_argument("TimedChoice: probe and period must be at least 1 step");
}

void TimedChoice::record(double seconds) {
  std::vector<double>& times = recent_[way_];
  times.push_back(seconds);
  if (times.size() > probe_) times.erase(times.begin());
  if (--left_ > 0) return;
  const int other = 1 - way_;
  if (recent_[other].size() < probe_) {
    // The other way's turn to be timed (at the start, and after each period).
    way_ = other;
    left_ = static_cast<int>(probe_);
    return;
  }
  way_ = median(recent_[0]) <= median(recent_[1]) ? 0 : 1;
  left_ = period_;
  recent_[1 - way_].clear();
}

}  // namespace kpipe::runtime
