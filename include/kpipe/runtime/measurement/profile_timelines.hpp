#pragma once
// A profile of `kpipe run --profile` (io::read_profile) as schedule
// timelines for `kpipe trace`: every executed action of every step, one step
// of replica 0's pipeline, and the simulator's step with the measured
// per-stage costs, in milliseconds (for people) or seconds (for a calibration).

#include <string>
#include <vector>

#include "kpipe/io/profile.hpp"
#include "kpipe/schedule/timeline.hpp"

namespace kpipe::runtime {

class ProfileTimelines {
 public:
  enum class Unit { milliseconds, seconds };

  // Reads and checks the file; every problem with it is one input error.
  explicit ProfileTimelines(const std::string& path, Unit unit = Unit::milliseconds);

  const io::ProfileInfo& info() const { return profile_.info; }
  std::size_t actions() const { return profile_.measured.size(); }
  int world_ranks() const { return static_cast<int>(profile_.info.p * profile_.info.d); }
  int steps() const { return static_cast<int>(profile_.info.steps); }

  // Every action of every step on every rank, on the clock all ranks share.
  schedule::Timeline all_steps() const;
  // One step of the pipeline of replica 0, from the first of its ranks to begin it.
  schedule::Timeline one_step(int step) const;
  // The simulator's step with the measured per-stage costs; no ranks when the profile has none.
  schedule::Timeline predicted() const;
  // When rank `rank` began step `step`, in seconds on the clock all ranks share.
  double step_start(int rank, int step) const {
    return profile_.step_start[static_cast<std::size_t>(rank) * steps() + step];
  }
  // The largest message replica 0's ranks sent, in bytes.
  std::int64_t largest_send_bytes() const;

 private:
  schedule::TimedAction timed(const io::ActionTable& table, std::size_t i, double origin) const;
  const char* unit() const { return units_per_second_ == 1.0 ? "s" : "ms"; }

  io::Profile profile_;
  double units_per_second_;
  std::vector<schedule::ActionKind> kinds_;
};

}  // namespace kpipe::runtime
