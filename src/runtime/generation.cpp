#include "kpipe/runtime/generation.hpp"

#include <algorithm>
#include <cmath>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/random.hpp"

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
std::vector<int> generate_tokens(const Pipeline<Scalar>& pipeline, std::vector<int> prompt,
                                 const SamplingOptions& options, const std::function<void(int)>& emit) {
  const model::ModelSpec& model = pipeline.spec().model;
  if (model.kind != model::ModelKind::transformer) {
    throw input_error("kpipe generate samples text from a transformer; set model.kind = \"transformer\"");
  }
  if (prompt.empty()) throw input_error("the prompt is empty; give at least one character, e.g. prompt=\"In\"");
  const int T = model.context;
  const schedule::Placement& placement = pipeline.schedule().placement;
  // Every rank knows each stage's output width from the model, so only the rows travel.
  const auto layers = model.layers();
  const auto& stages = pipeline.spec().stages;
  const comm::Communicator group = pipeline.grid().pipeline();
  const int me = pipeline.grid().pipeline_rank();
  const std::uint64_t stream = kernels::stream_key(options.seed, 0x67656e);  // "gen"
  for (int n = 0; n < options.tokens; ++n) {
    // The last T tokens; a shorter window is padded after its end, which a
    // causal model never looks at, and read at its last real position.
    const int length = std::min<int>(T, static_cast<int>(prompt.size()));
    std::vector<Scalar> row(static_cast<std::size_t>(T), Scalar(0));
    std::copy(prompt.end() - length, prompt.end(), row.begin());
    for (int stage = 0; stage < placement.stage_count(); ++stage) {
      const schedule::StagePlace owner = placement.place(stage);
      const int width = layers.at(static_cast<std::size_t>(stages.at(stage).end() - 1)).output_dim;
      if (owner.rank == me) {
        const model::Stage<Scalar>& chunk = *pipeline.chunks().at(static_cast<std::size_t>(owner.chunk));
        const auto X = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::generation_input", 1, chunk.input_dim());
        tensor::from_host<Scalar>(row, X);
        const auto Y = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::generation_output", 1, width);
        chunk.forward_no_grad(X, Y);
        row = tensor::to_host<Scalar>(Y);
      }
      row.resize(static_cast<std::size_t>(width));
      comm::broadcast(group, owner.rank, row);
    }
    const auto first = row.begin() + static_cast<std::ptrdiff_t>(length - 1) * model.vocab;
    const std::vector<double> logits(first, first + model.vocab);
    const int token =
        sample_token(logits, options.temperature, kernels::uniform01(stream, static_cast<std::uint64_t>(n)));
    prompt.push_back(token);
    if (emit) emit(token);
  }
  return prompt;
}

template std::vector<int> generate_tokens<float>(const Pipeline<float>&, std::vector<int>, const SamplingOptions&,
                                                 const std::function<void(int)>&);
template std::vector<int> generate_tokens<double>(const Pipeline<double>&, std::vector<int>, const SamplingOptions&,
                                                  const std::function<void(int)>&);

}  // namespace kpipe::runtime
