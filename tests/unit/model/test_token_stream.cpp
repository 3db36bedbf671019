// Sequences from a token stream: inputs as exact ids, labels shifted by one,
// a pure function of (step, position) for training, and non-overlapping
// windows for validation. The synthetic Markov stream is reproducible and
// learnable.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/loss.hpp"
#include "kpipe/model/data/markov_tokens.hpp"
#include "kpipe/model/data/token_stream.hpp"
#include "kpipe/tensor/allocation_counter.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

constexpr int T = 5, B = 8;

// Token i of the stream is i * 7 % 31: distinct neighbours, so a shift shows.
std::shared_ptr<const std::vector<std::int32_t>> stream(int n) {
  std::vector<std::int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = i * 7 % 31;
  return std::make_shared<const std::vector<std::int32_t>>(std::move(tokens));
}

TokenStreamSpec spec(TokenSampling sampling) {
  TokenStreamSpec s;
  s.sampling = sampling;
  s.seed = 11;
  s.context = T;
  s.global_batch = B;
  return s;
}

struct Batch {
  std::vector<double> inputs;  // rows x T
  std::vector<int> labels;     // rows·T
};

Batch draw(const TokenStreamSource<double>& source, std::int64_t step, std::int64_t first, int rows) {
  const auto X = tensor::uninitialized_matrix<double>("test::X", rows, T);
  Targets<double> targets;
  targets.labels = tensor::Labels("test::y", rows * T);
  source.fill_inputs(step, first, X);
  source.fill_targets(step, first, targets);
  const auto labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets.labels);
  return {tensor::to_host<double>(X), std::vector<int>(labels.data(), labels.data() + rows * T)};
}

}  // namespace

TEST_CASE("token stream: inputs are windows of the stream, labels the same shifted by one", "[model][tokens]") {
  tensor::ExecContext exec;
  const auto tokens = stream(200);
  const TokenStreamSource<double> source(tokens, spec(TokenSampling::random_windows), exec);
  CHECK(source.samples() == (200 - 1) / T);
  for (std::int64_t step = 0; step < 4; ++step) {
    const auto batch = draw(source, step, 0, B);
    for (int r = 0; r < B; ++r) {
      const std::int64_t start = source.start(step, r);
      REQUIRE(start >= 0);
      REQUIRE(start + T < 200);
      for (int t = 0; t < T; ++t) {
        CHECK(batch.inputs[r * T + t] == (*tokens)[start + t]);
        CHECK(batch.labels[r * T + t] == (*tokens)[start + t + 1]);
      }
    }
  }
}

TEST_CASE("token stream: a training offset is uniform over [0, N - T - 1]", "[model][tokens]") {
  tensor::ExecContext exec;
  const int n = T + 4;  // offsets 0..3
  const TokenStreamSource<float> source(stream(n), spec(TokenSampling::random_windows), exec);
  std::map<std::int64_t, int> count;
  for (std::int64_t step = 0; step < 400; ++step) {
    for (int position = 0; position < B; ++position) ++count[source.start(step, position)];
  }
  REQUIRE(count.size() == 4);
  CHECK(count.begin()->first == 0);
  CHECK(count.rbegin()->first == n - T - 1);
  for (const auto& [offset, times] : count) CHECK(std::abs(times - 800) < 120);
}

TEST_CASE("token stream: the batch of (step, position) does not depend on the microbatches", "[model][tokens]") {
  tensor::ExecContext exec;
  const auto sampling = GENERATE(TokenSampling::random_windows, TokenSampling::windows);
  const TokenStreamSource<double> source(stream(500), spec(sampling), exec);
  const auto whole = draw(source, 3, 0, 8);
  auto halves = draw(source, 3, 0, 4);
  const auto second = draw(source, 3, 4, 4);
  halves.inputs.insert(halves.inputs.end(), second.inputs.begin(), second.inputs.end());
  halves.labels.insert(halves.labels.end(), second.labels.begin(), second.labels.end());
  CHECK(whole.inputs == halves.inputs);
  CHECK(whole.labels == halves.labels);
  // A fresh source (another rank, a restart) draws the same sequences.
  const TokenStreamSource<double> again(stream(500), spec(sampling), exec);
  CHECK(draw(again, 3, 4, 4).labels == second.labels);
  if (sampling == TokenSampling::random_windows) CHECK(draw(source, 4, 0, 8).inputs != whole.inputs);
}

TEST_CASE("token stream: validation windows cover the split once, without overlap", "[model][tokens]") {
  tensor::ExecContext exec;
  const int n = 83;  // W = 82 / 5 = 16 windows; the last two tokens are left out
  const auto tokens = stream(n);
  const TokenStreamSource<double> source(tokens, spec(TokenSampling::windows), exec);
  const std::int64_t W = source.samples();
  CHECK(W == 16);
  std::vector<int> covered(n, 0);
  for (std::int64_t step = 0; step < W / B; ++step) {
    const auto batch = draw(source, step, 0, B);
    for (int k = 0; k < B; ++k) {
      const std::int64_t start = source.start(step, k);
      CHECK(start == (step * B + k) * T);
      for (int t = 0; t < T; ++t) {
        ++covered[start + t];
        CHECK(batch.inputs[k * T + t] == (*tokens)[start + t]);
        CHECK(batch.labels[k * T + t] == (*tokens)[start + t + 1]);
      }
    }
  }
  CHECK(std::count(covered.begin(), covered.begin() + W * T, 1) == W * T);
  CHECK(std::count(covered.begin() + W * T, covered.end(), 0) == n - W * T);
  CHECK(source.start(W / B, 0) == 0);  // the next pass starts over
}

TEST_CASE("token stream: steps after the first allocate nothing", "[model][tokens][allocations]") {
  tensor::ExecContext exec;
  const TokenStreamSource<float> source(stream(300), spec(TokenSampling::random_windows), exec);
  const auto X = tensor::uninitialized_matrix<float>("test::X", 4, T);
  Targets<float> targets;
  targets.labels = tensor::Labels("test::y", 4 * T);
  tensor::AllocationCounter counter;
  for (int step = 0; step < 3; ++step) {
    counter.start();
    for (int first = 0; first < B; first += 4) {
      source.fill_inputs(step, first, X);
      source.fill_targets(step, first, targets);
    }
    exec.space().fence();
    counter.stop();
    if (step > 0) CHECK(counter.total().count == 0);
  }
}

TEST_CASE("markov tokens: reproducible, in range, and far more predictable than uniform", "[model][tokens]") {
  const int vocab = 20;
  const auto tokens = markov_tokens(vocab, 7, 0, 1 << 14);
  CHECK(tokens == markov_tokens(vocab, 7, 0, 1 << 14));
  CHECK(tokens != markov_tokens(vocab, 7, 1, 1 << 14));
  CHECK(tokens != markov_tokens(vocab, 8, 0, 1 << 14));
  CHECK(*std::min_element(tokens.begin(), tokens.end()) >= 0);
  CHECK(*std::max_element(tokens.begin(), tokens.end()) < vocab);
  CHECK(std::set<std::int32_t>(tokens.begin(), tokens.end()).size() == vocab);
  // The empirical bigram entropy: what a model that learned the chain would score.
  std::map<std::pair<int, int>, double> pairs;
  std::map<int, double> firsts;
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    ++pairs[{tokens[i - 1], tokens[i]}];
    ++firsts[tokens[i - 1]];
  }
  double entropy = 0;
  for (const auto& [pair, count] : pairs) entropy -= count * std::log(count / firsts[pair.first]);
  entropy /= static_cast<double>(tokens.size() - 1);
  CHECK(entropy < 1.6);
  CHECK(entropy < 0.6 * std::log(vocab));
  // The validation walk follows the same chain: its transitions are mostly the table's.
  const auto test = markov_tokens(vocab, 7, 1, 4096);
  int likely = 0;
  for (std::size_t i = 1; i < test.size(); ++i) {
    for (int j = 0; j < markov_successors; ++j) {
      if (test[i] == markov_successor(vocab, 7, test[i - 1], j)) {
        ++likely;
        break;
      }
    }
  }
  CHECK(likely > 0.9 * (test.size() - 1));
}

// Packed documents of three tokens, each closed by token 31. A position
// whose input is a separator predicts the next document's first token, which
// takes no loss; every other label is the next token as before, and the
// source counts the ignored ones of any positions.
TEST_CASE("token stream of packed documents: no label across a boundary", "[model][tokens][documents]") {
  tensor::ExecContext exec;
  std::vector<std::int32_t> documents(200);
  for (int i = 0; i < 200; ++i) documents[i] = i % 4 == 3 ? 31 : i * 7 % 31;
  const auto tokens = std::make_shared<const std::vector<std::int32_t>>(std::move(documents));
  TokenStreamSpec packed = spec(TokenSampling::random_windows);
  packed.separator = 31;
  const TokenStreamSource<double> source(tokens, packed, exec);
  const TokenStreamSource<double> plain(tokens, spec(TokenSampling::random_windows), exec);
  for (std::int64_t step = 0; step < 3; ++step) {
    const Batch got = draw(source, step, 0, B), whole = draw(plain, step, 0, B);
    CHECK(got.inputs == whole.inputs);
    std::int64_t separators = 0;
    for (std::size_t i = 0; i < got.labels.size(); ++i) {
      const bool boundary = got.inputs[i] == packed.separator;
      separators += boundary ? 1 : 0;
      CHECK(got.labels[i] == (boundary ? kernels::ignored_label : whole.labels[i]));
    }
    CHECK(separators >= B);  // a window of 5 holds one or two
    CHECK(source.ignored_predictions(step, 0, B) == separators);
    CHECK(source.ignored_predictions(step, 2, 3) + source.ignored_predictions(step, 0, 2) +
              source.ignored_predictions(step, 5, B - 5) ==
          separators);
    CHECK(plain.ignored_predictions(step, 0, B) == 0);
  }
}
