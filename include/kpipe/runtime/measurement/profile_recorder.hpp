#pragma once
// `kpipe run --profile FILE`: keeps every executed action of every step on
// each rank, then gathers them to rank 0 (comm::gather_varying_to_root) and
// writes one HDF5 profile there (io::write_profile; layout in docs/formats.md,
// "Profile"). One writer keeps the file a set of plain tables, and a profile
// is small: 88 bytes per executed action per rank.

#include <string>
#include <vector>

#include "kpipe/runtime/execution/pipeline.hpp"

namespace kpipe::runtime {

class ProfileRecorder {
 public:
  ProfileRecorder(const runtime::Pipeline<float>& pipeline, std::string path);

  bool enabled() const { return !path_.empty(); }
  // `step_start`: when this rank began the step, in seconds since the run's
  // common start (a barrier). Nothing is kept when disabled.
  void add_step(int step, double step_start, const runtime::StepResult& result);
  // Collective over the world: predicts the step with the measured per-stage
  // costs, gathers everything to rank 0 and writes the file there; every rank
  // throws alike when that fails (comm::collectively).
  // `device` says where it ran (Environment::describe), `deck` and
  // `overrides` what it ran, as the run was given them.
  void write(const std::string& device, const std::string& deck, const std::vector<std::string>& overrides) const;

 private:
  const runtime::Pipeline<float>& pipeline_;
  std::string path_;
  std::vector<double> rows_;        // per executed action: the columns of io::ActionTable but rank
  std::vector<double> step_start_;  // per step
  std::vector<std::vector<runtime::ActionTiming>> timings_;  // per step, for runtime::measured_costs
  std::int64_t gradient_bytes_ = 0;                          // what a data-parallel sum moves from this rank
};

}  // namespace kpipe::runtime
