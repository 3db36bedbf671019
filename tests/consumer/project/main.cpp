// A program outside the kpipe tree that uses its installed headers and libraries.
#include <cstdio>

#include "kpipe/config/from_deck.hpp"

int main() {
  const auto deck = kpipe::config::parse_deck("pipeline.stages = 2\n", "consumer.toml");
  const auto config = kpipe::config::run_config(deck);
  std::printf("consumer: m = %d microbatches on %d stages\n", config.pipeline.microbatches, config.pipeline.stages);
  return 0;
}
