#pragma once
// Autoregressive sampling from a transformer held by a pipeline (kpipe
// generate): each new token runs the model stages on the ranks that hold
// them, in model-stage order, one sequence of the last T tokens at a time.
// Each stage's output goes to the rank of the next stage (a broadcast over
// the pipeline group, a T·dim row: small next to the compute), and the last
// stage's rank samples the token and sends it to every rank. Without a KV
// cache each token recomputes the whole window, T times the work of an
// incremental decoder (pipelined serving with a cache is kpipe serve's job).

#include <cstdint>
#include <functional>
#include <vector>

#include "kpipe/runtime/pipeline.hpp"

namespace kpipe::runtime {

struct SamplingOptions {
  int tokens = 200;          // new tokens to sample
  double temperature = 1.0;  // 0: greedy (the most likely token)
  std::uint64_t seed = 0;    // of the counter-based stream the samples draw from
};

// Token `index` drawn from `logits` (one row of vocab scores) at the given
// temperature with the uniform number `u` in [0, 1): inverse-CDF sampling of
// softmax(logits / temperature), or the argmax when temperature is 0 (ties:
// the lowest id).
int sample_token(const std::vector<double>& logits, double temperature, double u);

// `prompt` continued by options.tokens tokens, the same on every rank; every
// rank of the pipeline must call it. `emit` (optional) sees each new token
// as it is drawn, on every rank. Throws an input error for an empty prompt or
// a model that is not a transformer.
template <class Scalar>
std::vector<int> generate_tokens(const Pipeline<Scalar>& pipeline, std::vector<int> prompt,
                                 const SamplingOptions& options, const std::function<void(int)>& emit = {});

}  // namespace kpipe::runtime
