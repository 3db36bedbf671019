#pragma once
// Sampling text from a transformer held by a pipeline (kpipe generate): one
// request served by the pipelined serving engine (runtime/serving/serve.hpp), with
// its KV cache. Learned positions end at the model's context T, so a
// continuation longer than the window shifts it: the last T/2 tokens become
// the prompt of a fresh request (recomputed, as llama.cpp's context shift).

#include <cstdint>
#include <functional>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"

namespace kpipe::runtime {

struct SamplingOptions {
  int tokens = 200;          // new tokens to sample
  double temperature = 1.0;  // 0: greedy (the most likely token)
  std::uint64_t seed = 0;    // of the counter-based stream the samples draw from
};

// Token drawn from `logits` (one row of vocab scores) at the given
// temperature with the uniform number `u` in [0, 1): inverse-CDF sampling of
// softmax(logits / temperature), or the argmax when temperature is 0 (ties:
// the lowest id).
int sample_token(const std::vector<double>& logits, double temperature, double u);

// `prompt` continued by options.tokens tokens; every rank of the pipeline
// must call it and gets the same tokens. `emit` (optional) sees the new
// tokens a window at a time. Throws an
// input error for an empty prompt or a model that is not a transformer.
template <class Scalar>
std::vector<int> generate_tokens(Pipeline<Scalar>& pipeline, std::vector<int> prompt, const SamplingOptions& options,
                                 config::InferenceConfig inference,
                                 const std::function<void(const std::vector<int>&)>& emit = {});

}  // namespace kpipe::runtime
