#pragma once
// `kpipe plan`'s memory levers: what each rank would need under every
// training schedule and recomputation the deck's ranks can run (the deck's
// b, d and t), side by side, so a user sees what fits before running
// (docs/runtime.md, the Memory bullet).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"

namespace kpipe::app {

struct LeverMemory {
  std::string schedule;
  int v = 1;
  config::Recompute recompute = config::Recompute::none;
  std::vector<double> mib;  // each pipeline rank's memory estimate

  double largest_mib() const;
};

// Every training schedule, at the deck's v where it takes that and else at
// the fewest chunks it takes, times none, selective (where it keeps less
// than none) and full recomputation; shapes the deck's other keys refuse are
// left out. Every estimate takes `baseline_bytes` as the process's own.
std::vector<LeverMemory> memory_levers(const LoadedDeck& loaded, std::int64_t baseline_bytes);

// The table kpipe plan prints: one row per schedule, one column per
// recomputation, each cell the largest rank's MiB, marked where it exceeds
// `limit_mib` (0: no limit).
std::string lever_table(const std::vector<LeverMemory>& levers, double limit_mib);
nlohmann::json levers_json(const std::vector<LeverMemory>& levers);

}  // namespace kpipe::app
