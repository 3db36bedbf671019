#include "commands.hpp"
#include "kpipe/comm/broadcast.hpp"
#include "kpipe/core/log.hpp"

namespace kpipe::app {

LoadedDeck load_deck(const DeckArguments& arguments) {
  const std::string text =
      comm::broadcast_from_root(MPI_COMM_WORLD, [&] { return config::read_deck_file(arguments.path); });
  config::Deck deck = config::parse_deck(text, arguments.path, arguments.overrides);
  std::vector<std::string> warnings;
  config::PipelineShape shape = config::pipeline_shape(deck, &warnings);
  for (const auto& warning : warnings) log::warning("{}", warning);
  return {std::move(deck), shape};
}

}  // namespace kpipe::app
