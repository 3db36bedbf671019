#include "kpipe/model/data/markov_tokens.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/random.hpp"

namespace kpipe::model {

namespace {

// The chain's own stream domains: its table and its walks never share a stream
// with the model's or the data's other draws.
constexpr std::uint64_t table_domain = 0x6d61726b74ULL;  // "markt"
constexpr std::uint64_t walk_domain = 0x6d61726b77ULL;   // "markw"

}  // namespace

std::int32_t markov_successor(int vocab, std::uint64_t seed, std::int32_t symbol, int j) {
  const std::uint64_t key = kernels::stream_key(seed, table_domain);
  const auto counter = static_cast<std::uint64_t>(symbol) * markov_successors + static_cast<std::uint64_t>(j);
  return static_cast<std::int32_t>(kernels::random_bits(key, counter) % static_cast<std::uint64_t>(vocab));
}

std::vector<std::int32_t> markov_tokens(int vocab, std::uint64_t seed, std::uint64_t split, std::int64_t length) {
  if (vocab < 1) throw input_error(fmt::format("model.vocab = {}; a token stream needs at least one symbol", vocab));
  std::vector<std::int32_t> successors(static_cast<std::size_t>(vocab) * markov_successors);
  for (std::int32_t symbol = 0; symbol < vocab; ++symbol) {
    for (int j = 0; j < markov_successors; ++j) {
      successors[static_cast<std::size_t>(symbol) * markov_successors + j] = markov_successor(vocab, seed, symbol, j);
    }
  }
  const std::uint64_t key = kernels::stream_key(seed, walk_domain, split);
  const auto uniform = [&](std::uint64_t bits) { return static_cast<std::int32_t>((bits >> 4) % vocab); };
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    const std::uint64_t bits = kernels::random_bits(key, static_cast<std::uint64_t>(i));
    if (i == 0) {
      tokens[0] = uniform(bits);
      continue;
    }
    // Four bits pick the successor: 0-7 the first, 8-11 the second, 12-13 the third, 14 the fourth, 15 any.
    const unsigned pick = bits & 15U;
    const int j = pick < 8 ? 0 : pick < 12 ? 1 : pick < 14 ? 2 : pick < 15 ? 3 : -1;
    const std::int32_t* next = &successors[static_cast<std::size_t>(tokens[i - 1]) * markov_successors];
    tokens[i] = j < 0 ? uniform(bits) : next[j];
  }
  return tokens;
}

std::vector<std::int32_t> markov_split(int vocab, int context, std::uint64_t seed, bool train) {
  const std::int64_t sequence = std::int64_t{context} + 1;
  const std::int64_t length =
      train ? std::max<std::int64_t>(1 << 16, 16 * sequence) : std::max<std::int64_t>(1 << 13, 4 * sequence);
  return markov_tokens(vocab, seed, train ? 0 : 1, length);
}

}  // namespace kpipe::model
