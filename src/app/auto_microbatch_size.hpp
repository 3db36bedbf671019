#pragma once
// train.microbatch_size = "auto": `kpipe run` measures the sizes that leave
// every model stage a microbatch (runtime::measure_size) and trains with the
// fastest, converting the deck it read once at each size.

#include <optional>
#include <string>

#include "commands.hpp"
#include "kpipe/runtime/tuning/microbatch_sweep.hpp"

namespace kpipe::app {

// The loaded deck with train.microbatch_size = b, converted and checked again
// without reading the file; an input error names b when the deck cannot run with it.
LoadedDeck deck_at_size(const LoadedDeck& loaded, int b);
// runtime::measure_size, or none where the schedule or the memory refuses
// the configuration (every rank alike), logged as "`what`: skipped (why)".
std::optional<runtime::SizeMeasurement> measured_if_it_fits(const config::RunConfig& config, int steps,
                                                            const std::string& what);
// Measures every size that leaves each model stage a microbatch and returns
// the deck at the fastest; `loaded` as it is when b is a number.
LoadedDeck with_measured_microbatch_size(LoadedDeck loaded);

}  // namespace kpipe::app
