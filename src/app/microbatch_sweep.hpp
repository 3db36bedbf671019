#pragma once
// Training throughput measured over microbatch sizes b: what `kpipe sweep`
// tabulates against the simulator, and how `kpipe run` settles
// train.microbatch_size = "auto" before it trains.

#include <optional>
#include <vector>

#include "commands.hpp"
#include "kpipe/schedule/calibration.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::app {

struct SizeMeasurement {
  int b = 0, m = 0;
  double measured_samples_per_second = 0.0;  // rank 0's step times, as kpipe run reports; the same on every rank
  double peak_activation_mib = 0.0;          // the largest rank's peak stashed activations
  schedule::Schedule schedule;
  std::optional<schedule::Calibration> calibration;  // rank 0 only
};

// Refuses decks whose b cannot vary (an inference schedule, a schedule file);
// `who` names the asker in the message.
void check_sweepable(const config::RunConfig& config, const char* who);
// Every b that makes m = B/(b·d) an integer, or the requested ones (each checked against those).
std::vector<int> sizes_to_measure(const config::RunConfig& config, const std::vector<int>& requested);
// The loaded deck with train.microbatch_size = b, converted and checked again
// without reading the file; an input error names b when the deck cannot run with it.
LoadedDeck deck_at_size(const LoadedDeck& loaded, int b);
// Builds the pipeline and measures `steps` training steps after one warm-up step.
SizeMeasurement measure_size(const config::RunConfig& config, int steps);
// train.microbatch_size = "auto": measures every size that leaves each model
// stage a microbatch and returns the deck at the fastest; `loaded` as it is otherwise.
LoadedDeck with_measured_microbatch_size(LoadedDeck loaded);

// "1, 2, 4"
std::string size_list(const std::vector<int>& sizes);

}  // namespace kpipe::app
