#pragma once
// A learnable token stream without files: what data.source = "synthetic"
// feeds a transformer. A fixed random first-order Markov chain over `vocab`
// symbols, drawn from data.seed: each symbol has four successors, taken with
// probabilities 8/16, 4/16, 2/16 and 1/16, and with 1/16 the next symbol is
// uniform. Its entropy rate, the best loss a model can reach, is at most
// 1.13 + ln(16·vocab)/16 nats (1.5 for 65 symbols), against ln(vocab) (4.2)
// for an untrained model, so a few hundred steps show the loss falling.
//
// Every split follows the same chain (`split` selects an independent walk),
// so the validation loss measures what training learned. Token i is a pure
// function of (seed, split, i) and of token i - 1.

#include <cstdint>
#include <vector>

namespace kpipe::model {

inline constexpr int markov_successors = 4;

// `length` tokens of walk `split` of the chain of (vocab, seed).
std::vector<std::int32_t> markov_tokens(int vocab, std::uint64_t seed, std::uint64_t split, std::int64_t length);

// The synthetic split a transformer with context T trains (train) or
// validates on: max(2^16, 16(T+1)) or max(2^13, 4(T+1)) tokens of walk 0 or 1.
std::vector<std::int32_t> markov_split(int vocab, int context, std::uint64_t seed, bool train);

// The j-th likely successor of `symbol` (j < markov_successors): the chain's table.
std::int32_t markov_successor(int vocab, std::uint64_t seed, std::int32_t symbol, int j);

}  // namespace kpipe::model
