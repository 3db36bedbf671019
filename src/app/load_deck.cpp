#include "commands.hpp"
#include "kpipe/comm/broadcast.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"

namespace kpipe::app {

LoadedDeck load_deck(const DeckArguments& arguments) {
  const std::string text =
      comm::broadcast_from_root(comm::world(), [&] { return config::read_deck_file(arguments.path); });
  config::Deck deck = config::parse_deck(text, arguments.path, arguments.overrides);
  std::vector<std::string> warnings;
  config::RunConfig config = config::run_config(deck, &warnings);
  for (const auto& warning : warnings) log::warning("{}", warning);
  comm::watch_collectives(config.runtime.watchdog_seconds, comm::rank_of(comm::world()));
  // No output may name a file the run reads.
  for (const std::string& input :
       {arguments.path, config.pipeline.schedule_file, config.data.path, config.checkpoint.restart}) {
    protect_input(input);
  }
  return {std::move(deck), std::move(config)};
}

}  // namespace kpipe::app
