#include "commands.hpp"
#include "kpipe/comm/broadcast.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/log.hpp"
#include "output_file.hpp"

namespace kpipe::app {

LoadedDeck load_deck(const DeckArguments& arguments) {
  const std::string text =
      comm::broadcast_from_root(comm::world(), [&] { return config::read_deck_file(arguments.path); });
  config::Deck deck = config::parse_deck(text, arguments.path, arguments.overrides);
  std::vector<std::string> warnings;
  config::RunConfig config = config::run_config(deck, &warnings);
  for (const auto& warning : warnings) log::warning("{}", warning);
  protect_input(arguments.path);
  protect_input(config.pipeline.schedule_file);
  return {std::move(deck), std::move(config)};
}

}  // namespace kpipe::app
