#include <fmt/format.h>

#include "commands.hpp"
#include "kpipe/config/schema.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/tuning/run_prediction.hpp"

namespace kpipe::app {

int deck_command(const runtime::Environment& /*env*/, const DeckOptions& options) {
  if (options.doc) {
    log::info("{}", config::schema_markdown());
    return 0;
  }
  if (options.deck.path.empty()) throw input_error("kpipe deck needs a DECK file, or --doc for the key reference");
  const LoadedDeck loaded = load_deck(options.deck);
  // What a run resolves before it reads data or allocates: layer kinds, the
  // partition, the data source.
  runtime::predict_run(loaded.config);
  const auto& s = loaded.config.pipeline;
  log::info(
      "{}: valid deck: {} schedule, p = {}, v = {}, t = {}, d = {} (world size {}), m = {} microbatches of {}, {} "
      "layers",
      printable(options.deck.path), s.schedule, s.stages, s.virtual_stages, s.tensor_parallel, s.data_parallel,
      s.world_size(), s.microbatches, loaded.config.train.microbatch_size, loaded.config.layers);
  if (options.resolved) log::info("{}", loaded.deck.resolved_toml());
  return 0;
}

}  // namespace kpipe::app
