#pragma once
// A choice between two ways of running a rank's steps that give the same
// results bit for bit (lanes split by microbatches or by layers), made by
// their measured step times, since which is faster depends on what the
// host's cores share at the moment: each way runs `probe` steps in turn, then
// the faster runs for `period` steps, then the other `probe` steps again, and
// so on, each decision by the median of each way's last `probe` steps (a
// step that allocated or was preempted does not decide it).

#include <cstddef>
#include <vector>

namespace kpipe::runtime {

class TimedChoice {
 public:
  TimedChoice(int probe, int period);

  // The way (0 or 1) the next step runs.
  int way() const { return way_; }
  // The step just run, in way(), took `seconds`.
  void record(double seconds);

 private:
  std::size_t probe_;
  int period_;
  int way_ = 0;
  int left_;                       // steps before the next decision
  std::vector<double> recent_[2];  // each way's last probe_ step times
};

}  // namespace kpipe::runtime
