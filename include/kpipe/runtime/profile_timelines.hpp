#pragma once
// A profile of `kpipe run --profile` (io::read_profile) as schedule
// timelines for `kpipe trace`: every executed action of every step, one step
// of replica 0's pipeline, and the simulator's step with the measured
// per-stage costs, in milliseconds.

#include <string>
#include <vector>

#include "kpipe/io/profile.hpp"
#include "kpipe/schedule/timeline.hpp"

namespace kpipe::runtime {

class ProfileTimelines {
 public:
  // Reads and checks the file; every problem with it is one input error.
  explicit ProfileTimelines(const std::string& path);

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

 private:
  double step_start(int rank, int step) const {
    return profile_.step_start[static_cast<std::size_t>(rank) * steps() + step];
  }
  schedule::TimedAction timed(const io::ActionTable& table, std::size_t i, double origin) const;

  io::Profile profile_;
  std::vector<schedule::ActionKind> kinds_;
};

}  // namespace kpipe::runtime
