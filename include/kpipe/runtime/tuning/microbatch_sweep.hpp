#pragma once
// Training throughput measured over microbatch sizes b: what `kpipe sweep`
// tabulates against the simulator, and what `kpipe run` ranks when it
// settles train.microbatch_size = "auto".

#include <optional>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

struct SizeMeasurement {
  int b = 0, m = 0;
  double measured_samples_per_second = 0.0;  // rank 0's step times, as kpipe run reports; the same on every rank
  double peak_activation_mib = 0.0;          // the largest rank's peak stashed activations
  // The largest rank's peak resident memory during the measurement (from
  // its start: reset_peak_resident).
  double peak_resident_mib = 0.0;
  schedule::Schedule schedule;
  std::optional<schedule::Calibration> calibration;  // rank 0 only
};

// Refuses decks whose b cannot vary (an inference schedule, a schedule file);
// `who` names the asker in the message.
void check_sweepable(const config::RunConfig& config, const char* who);
// Every b that makes m = B/(b·d) an integer, or the requested ones (each checked against those).
std::vector<int> sizes_to_measure(const config::RunConfig& config, const std::vector<int>& requested);
// Builds the pipeline and measures `steps` training steps after one warm-up step.
SizeMeasurement measure_size(const config::RunConfig& config, int steps);

// "1, 2, 4"
std::string size_list(const std::vector<int>& sizes);

}  // namespace kpipe::runtime
