// A program outside the kpipe tree that uses its installed headers and libraries.
#include <cstdio>

#include "kpipe/config/shape.hpp"

int main() {
  const auto deck = kpipe::config::parse_deck("pipeline.stages = 2\n", "consumer.toml");
  const auto shape = kpipe::config::pipeline_shape(deck);
  std::printf("consumer: m = %d microbatches on %d stages\n", shape.microbatches, shape.stages);
  return 0;
}
