#include "memory_levers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/runtime/tuning/memory_estimate.hpp"
#include "kpipe/runtime/tuning/tuning.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/run_plan.hpp"

namespace kpipe::app {

namespace {

constexpr config::Recompute recomputations[] = {config::Recompute::none, config::Recompute::selective,
                                                config::Recompute::full};

}  // namespace

double LeverMemory::largest_mib() const { return *std::max_element(mib.begin(), mib.end()); }

std::vector<LeverMemory> memory_levers(const LoadedDeck& loaded, std::int64_t baseline_bytes) {
  std::vector<LeverMemory> levers;
  if (!loaded.config.pipeline.schedule_file.empty()) return levers;  // a schedule file runs as written
  for (const std::string& name : schedule::schedule_names()) {
    const schedule::ScheduleInfo& info = schedule::find_schedule(name);
    if (!info.trains) continue;
    // The deck's v where the schedule takes that, else the fewest it takes.
    const int v = runtime::chunks_taken(info, loaded.config, {loaded.config.pipeline.virtual_stages, 1, 2});
    if (v == 0) continue;
    for (const config::Recompute recompute : recomputations) {
      try {
        config::Deck deck = config::with_override(loaded.deck, "pipeline.schedule=" + name);
        deck = config::with_override(deck, fmt::format("pipeline.virtual_stages={}", v));
        deck = config::with_override(deck, fmt::format("pipeline.recompute={}", config::name_of(recompute)));
        // The deck's partition is for its own p·v model stages.
        if (v != loaded.config.pipeline.virtual_stages) deck = config::with_override(deck, "pipeline.partition=[]");
        const config::RunConfig config = config::run_config(deck);
        const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
        const schedule::Schedule schedule = schedule::make_schedule(schedule::run_plan(config));
        LeverMemory lever{name, v, recompute, {}};
        for (const auto& estimate : runtime::memory_estimates(config, spec, schedule, baseline_bytes)) {
          lever.mib.push_back(static_cast<double>(estimate.total()) / (1 << 20));
        }
        levers.push_back(std::move(lever));
      } catch (const Error& e) {
        // A shape the deck's other keys refuse, or selective recomputation with nothing to rebuild.
        if (e.kind() != ErrorKind::input) throw;
      }
    }
  }
  return levers;
}

std::string lever_table(const std::vector<LeverMemory>& levers, double limit_mib) {
  std::map<std::pair<std::string, int>, std::map<config::Recompute, double>> rows;
  std::vector<std::pair<std::string, int>> order;
  bool over = false;
  for (const LeverMemory& lever : levers) {
    const auto key = std::make_pair(lever.schedule, lever.v);
    if (rows.count(key) == 0) order.push_back(key);
    rows[key][lever.recompute] = lever.largest_mib();
    over = over || (limit_mib > 0 && lever.largest_mib() > limit_mib);
  }
  std::string table = fmt::format("{:<12} {:>2} {:>11} {:>11} {:>11}", "schedule", "v", "none", "selective", "full");
  for (const auto& key : order) {
    table += fmt::format("\n{:<12} {:>2}", key.first, key.second);
    for (const config::Recompute recompute : recomputations) {
      const auto found = rows[key].find(recompute);
      const std::string cell = found == rows[key].end()                     ? "-"
                               : limit_mib > 0 && found->second > limit_mib ? fmt::format("{:.1f} over", found->second)
                                                                            : fmt::format("{:.1f}", found->second);
      table += fmt::format(" {:>11}", cell);
    }
  }
  if (over) table += fmt::format("\nover: above runtime.memory_limit_mib = {:g}", limit_mib);
  return table;
}

nlohmann::json levers_json(const std::vector<LeverMemory>& levers) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LeverMemory& lever : levers) {
    rows.push_back({{"schedule", lever.schedule},
                    {"v", lever.v},
                    {"recompute", std::string(config::name_of(lever.recompute))},
                    {"estimated_mib_per_rank", lever.mib}});
  }
  return rows;
}

}  // namespace kpipe::app
