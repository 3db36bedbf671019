#include "kpipe/runtime/serving/generation.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/runtime/serving/serve.hpp"

namespace kpipe::runtime {

int sample_token(const std::vector<double>& logits, double temperature, double u) {
  const auto best = std::max_element(logits.begin(), logits.end());
  if (temperature <= 0) return static_cast<int>(best - logits.begin());
  std::vector<double> weights(logits.size());
  double total = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) total += weights[v] = std::exp((logits[v] - *best) / temperature);
  double cumulative = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    cumulative += weights[v];
    if (u * total < cumulative) return static_cast<int>(v);
  }
  return static_cast<int>(logits.size()) - 1;
}

template <class Scalar>
std::vector<int> generate_tokens(Pipeline<Scalar>& pipeline, std::vector<int> prompt, const SamplingOptions& options,
                                 config::InferenceConfig inference,
                                 const std::function<void(const std::vector<int>&)>& emit) {
  if (prompt.empty()) throw input_error("the prompt is empty; give at least one character, e.g. prompt=\"In\"");
  const int T = pipeline.spec().model.context;
  inference.temperature = options.temperature;
  inference.seed = options.seed;
  int left = options.tokens;
  for (int window = 0; left > 0; ++window) {
    // A full window leaves no position for a new token: keep its last half.
    const int keep = static_cast<int>(prompt.size()) < T ? static_cast<int>(prompt.size()) : T / 2;
    Request request;
    request.id = window;  // a fresh sampling stream per window
    request.prompt.assign(prompt.end() - keep, prompt.end());
    request.max_new_tokens = std::min(left, T - keep);
    const ServeResult result = serve(pipeline, {request}, inference);
    // The tokens on every rank; -1 marks a window the KV cache cannot hold.
    std::vector<int> generated(static_cast<std::size_t>(request.max_new_tokens), -1);
    if (!result.requests.empty() && result.requests.front().rejected.empty()) {
      generated = result.requests.front().generated;
    }
    comm::broadcast(pipeline.grid().pipeline(), pipeline.schedule().placement.place(0).rank, generated);
    comm::broadcast(pipeline.grid().tensor(), 0, generated);  // the scheduler's tensor group led it
    if (generated.front() < 0) {
      throw input_error(fmt::format("a window of {} tokens does not fit inference.kv_cache_mib = {}; raise it", T,
                                    inference.kv_cache_mib));
    }
    left -= request.max_new_tokens;
    prompt.insert(prompt.end(), generated.begin(), generated.end());
    if (emit) emit(generated);
  }
  return prompt;
}

template std::vector<int> generate_tokens<float>(Pipeline<float>&, std::vector<int>, const SamplingOptions&,
                                                 config::InferenceConfig,
                                                 const std::function<void(const std::vector<int>&)>&);
template std::vector<int> generate_tokens<double>(Pipeline<double>&, std::vector<int>, const SamplingOptions&,
                                                  config::InferenceConfig,
                                                  const std::function<void(const std::vector<int>&)>&);

}  // namespace kpipe::runtime
