// The sequential trainer: learning, partition independence (bitwise), the
// 1/B gradient scaling, data-parallel replicas, and stopping on NaN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/data/token_stream.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "random_matrix.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

TrainerSpec from_text(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return TrainerSpec::from_config(config::run_config(config::parse_deck(text, "deck.toml", overrides)));
}

// Bitwise equality, NaN included.
template <class Scalar>
bool bitwise_equal(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Scalar)) == 0;
}

template <class Scalar>
std::vector<Scalar> train(const TrainerSpec& spec, int steps) {
  tensor::ExecContext exec;
  SequentialTrainer<Scalar> trainer(spec, exec);
  for (int s = 0; s < steps; ++s) trainer.step();
  return trainer.weights();
}

// A 6-layer mlp; the same with model.kind=residual_mlp has four blocks.
const std::string six_layers =
    "model.input_dim = 12\nmodel.hidden = [32, 24, 32, 16, 32]\nmodel.output_dim = 5\ntrain.global_batch = 32\n"
    "train.microbatch_size = 8\ntrain.grad_clip = 0.5\npipeline.schedule = \"gpipe\"\n";

// max |a - b| over the elements.
template <class Scalar>
double largest_difference(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(static_cast<double>(a[i] - b[i])));
  return largest;
}

// One plain SGD step moves each weight by lr times its gradient, nothing else.
const std::vector<std::string> plain_sgd{"train.optimizer=sgd", "train.momentum=0", "train.lr=0.5",
                                         "train.grad_clip=0"};

}  // namespace

TEST_CASE("the trainer drives the classification loss down 10x in 200 steps", "[model][trainer]") {
  tensor::ExecContext exec;
  const auto spec = from_text(
      "model.kind = \"mlp\"\nmodel.input_dim = 64\nmodel.hidden = [64, 64, 64, 64]\nmodel.output_dim = 10\n"
      "train.global_batch = 64\ntrain.microbatch_size = 16\npipeline.stages = 2\n");
  SequentialTrainer<float> trainer(spec, exec);
  const double first = trainer.step();
  double last = first;
  for (int s = 1; s < 200; ++s) last = trainer.step();
  INFO("loss " << first << " -> " << last);
  CHECK(first == Approx(std::log(10.0)).epsilon(0.05));
  CHECK(last < first / 10);
}

TEST_CASE("p = 1 and p = 4 stages give bitwise the same weights after 20 steps", "[model][trainer]") {
  const auto kind = GENERATE(std::string("model.kind=mlp"), std::string("model.kind=residual_mlp"));
  const auto hidden = kind == "model.kind=mlp" ? "model.hidden=[32, 24, 32, 16, 32]" : "model.hidden=[32, 32, 32, 32]";
  const auto gemm = GENERATE(std::string("compute.gemm=vendor"), std::string("compute.gemm=packed"));
  INFO(kind << ", " << gemm);
  const auto one = from_text(six_layers, {kind, hidden, gemm, "pipeline.stages=1"});
  const auto four = from_text(six_layers, {kind, hidden, gemm, "pipeline.stages=4", "pipeline.recompute=full"});
  REQUIRE(one.stages.size() == 1);
  REQUIRE(four.stages.size() == 4);
  const auto reference = train<float>(one, 20);
  CHECK(bitwise_equal(train<float>(four, 20), reference));
  // And the result is a real change from the initial weights.
  CHECK(!bitwise_equal(train<float>(one, 0), reference));
}

TEST_CASE("an explicit partition and the SGD optimizer keep the weights bitwise equal", "[model][trainer]") {
  const auto a = from_text(six_layers, {"pipeline.stages=2", "pipeline.partition=[5, 1]", "train.optimizer=sgd"});
  const auto b = from_text(six_layers, {"pipeline.stages=3", "pipeline.partition=[1, 2, 3]", "train.optimizer=sgd"});
  CHECK(bitwise_equal(train<float>(a, 5), train<float>(b, 5)));
}

TEST_CASE("microbatch gradients add up to the full-batch gradient", "[model][trainer]") {
  // One SGD step without momentum: w1 = w0 - lr * mean-loss gradient, whether
  // the batch is one microbatch or eight.
  auto whole = plain_sgd, split = plain_sgd;
  whole.push_back("train.microbatch_size=32");
  split.push_back("train.microbatch_size=4");
  const auto w0 = train<double>(from_text(six_layers, whole), 0);
  const auto w_whole = train<double>(from_text(six_layers, whole), 1);
  const auto w_split = train<double>(from_text(six_layers, split), 1);
  const double change = largest_difference(w_whole, w0);
  const double diff = largest_difference(w_whole, w_split);
  CHECK(change > 1e-3);
  CHECK(diff < 1e-12);
}

TEST_CASE("data-parallel replicas see disjoint shards and are summed", "[model][trainer]") {
  // d = 2 with microbatches of 8 computes the same mean gradient as d = 1, in
  // another order: equal up to rounding, and bitwise for any partition.
  const auto d1 = train<double>(from_text(six_layers), 3);
  const auto d2 = train<double>(from_text(six_layers, {"pipeline.data_parallel=2"}), 3);
  const auto d2_split = train<double>(from_text(six_layers, {"pipeline.data_parallel=2", "pipeline.stages=3"}), 3);
  CHECK(largest_difference(d1, d2) < 1e-10);
  CHECK(bitwise_equal(d2, d2_split));
}

TEST_CASE("a NaN loss stops the step and names step and microbatch", "[model][trainer]") {
  tensor::ExecContext exec;
  auto spec = from_text(six_layers, {"train.optimizer=sgd", "train.grad_clip=0"});
  spec.optimizer.lr = 1e30;
  SequentialTrainer<float> trainer(spec, exec);
  trainer.step();
  const auto last_good = trainer.weights();
  try {
    trainer.step();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::runtime);
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("in step 1, microbatch 0;") != std::string::npos);
    CHECK(message.find("Lower train.lr") != std::string::npos);
  }
  CHECK(bitwise_equal(trainer.weights(), last_good));
}

TEST_CASE("a batch that does not split into microbatches is an input error", "[model][trainer]") {
  tensor::ExecContext exec;
  auto spec = from_text(six_layers);
  spec.microbatch_size = 5;
  CHECK_THROWS_WITH(SequentialTrainer<float>(spec, exec),
                    "global batch 32 must split into data_parallel 1 replicas of whole microbatches of 5 samples");
}

TEST_CASE("compute.gemm = packed trains like the vendor path", "[model][trainer][packed]") {
  // Large plain SGD steps: a product on a packed copy of last step's W or W^T
  // would move the weights far more than the two libraries' rounding does.
  auto vendor = plain_sgd, packed = plain_sgd;
  vendor.push_back("compute.gemm=vendor");
  packed.push_back("compute.gemm=packed");
  const auto w0 = train<float>(from_text(six_layers, vendor), 0);
  const auto w_vendor = train<float>(from_text(six_layers, vendor), 4);
  const auto w_packed = train<float>(from_text(six_layers, packed), 4);
  const double change = largest_difference(w_vendor, w0);
  const double diff = largest_difference(w_vendor, w_packed);
  INFO("largest change " << change << ", largest difference " << diff);
  CHECK(change > 1e-2);
  CHECK(diff < 1e-5);
}

TEST_CASE("compute.gemm = packed computes with the weights of the last update", "[model][trainer][packed]") {
  const auto kind = GENERATE(std::string("model.kind=mlp"), std::string("model.kind=residual_mlp"));
  const auto hidden = kind == "model.kind=mlp" ? "model.hidden=[32, 24, 32, 16, 32]" : "model.hidden=[32, 32, 32, 32]";
  const auto packed = from_text(six_layers, {kind, hidden, "compute.gemm=packed", "pipeline.stages=2"});
  tensor::ExecContext exec;
  SequentialTrainer<float> trainer(packed, exec);
  // A vendor-path copy of the whole model, given the trainer's weights after each step.
  StageOptions vendor_options = packed.stage;
  vendor_options.kernels.gemm = kernels::GemmPath::vendor;
  Stage<float> vendor(packed.model, {0, packed.model.layer_count()}, vendor_options, exec);
  const auto X = test::random_matrix<float>(8, packed.model.input_dim, 1);
  auto hidden_y = tensor::uninitialized_matrix<float>("test::hidden", 8, trainer.stages()[0].output_dim());
  auto y = tensor::uninitialized_matrix<float>("test::y", 8, packed.model.output_dim);
  auto expected = tensor::uninitialized_matrix<float>("test::expected", 8, packed.model.output_dim);
  std::vector<float> previous;
  for (int step = 0; step < 3; ++step) {
    INFO(kind << ", after " << step << " steps");
    const auto mine = trainer.parameters();
    const auto theirs = vendor.parameters();
    for (std::size_t i = 0; i < mine.size(); ++i) Kokkos::deep_copy(theirs[i].value, mine[i].value);
    trainer.stages()[0].forward_no_grad(X, hidden_y);
    trainer.stages()[1].forward_no_grad(hidden_y, y);
    vendor.forward_no_grad(X, expected);
    const auto now = tensor::to_host<float>(y);
    const auto want = tensor::to_host<float>(expected);
    for (std::size_t i = 0; i < now.size(); ++i) CHECK(now[i] == Approx(want[i]).margin(1e-5));
    CHECK(now != previous);
    previous = now;
    trainer.step();
  }
}

// Packed documents of four tokens, each closed by token 0: a step's loss is
// the mean cross-entropy over the predictions within documents — those at a
// separator, which would predict the next document, take none — of the
// model's packed logits, computed here from its stage and the plain labels.
TEST_CASE("on packed documents a step's loss is the mean over the predictions within documents",
          "[model][trainer][documents]") {
  const TrainerSpec spec = from_text(
      "model.kind = \"llama\"\nmodel.vocab = 7\nmodel.context = 12\nmodel.dim = 8\nmodel.heads = 2\n"
      "model.kv_heads = 1\nmodel.ffn_dim = 12\nmodel.layers = 2\ndata.pack_documents = true\n"
      "data.document_separator = 0\ntrain.global_batch = 4\ntrain.microbatch_size = 2\npipeline.stages = 1\n");
  std::vector<std::int32_t> documents(300);
  for (int i = 0; i < 300; ++i) documents[i] = i % 5 == 4 ? 0 : 1 + i * 3 % 6;
  const auto tokens = std::make_shared<const std::vector<std::int32_t>>(std::move(documents));
  const int T = spec.model.context, B = spec.global_batch, vocab = spec.model.vocab;
  TokenStreamSpec plain;
  plain.seed = spec.data.seed;
  plain.context = T;
  plain.global_batch = B;
  TokenStreamSpec packed = plain;
  packed.separator = 0;
  tensor::ExecContext exec;
  SequentialTrainer<double> trainer(spec, exec, std::make_unique<TokenStreamSource<double>>(tokens, packed, exec));

  // The step's sequences and their next tokens, and the packed model's logits.
  const TokenStreamSource<double> source(tokens, plain, exec);
  const auto X = tensor::uninitialized_matrix<double>("test::x", B, T);
  Targets<double> next;
  next.labels = tensor::Labels("test::labels", B * T);
  source.fill_inputs(0, 0, X);
  source.fill_targets(0, 0, next);
  Documents places(0);
  places.assign<double>(exec.space(), X);
  StageOptions options = spec.stage;
  options.documents = &places;
  Stage<double> stage(spec.model, {0, spec.model.layer_count()}, options, exec);
  const auto Y = tensor::uninitialized_matrix<double>("test::y", B, spec.model.output_dim);
  stage.forward_no_grad(X, Y);
  const auto ids = tensor::to_host<double>(X), logits = tensor::to_host<double>(Y);
  const int width = spec.model.output_dim / T;
  const auto labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), next.labels);
  double sum = 0;
  int counted = 0;
  for (int p = 0; p < B * T; ++p) {
    if (ids[p] == 0) continue;
    const double* row = &logits[static_cast<std::size_t>(p) * width];  // the vocabulary, then its padding
    const double max = *std::max_element(row, row + vocab);
    double total = 0;
    for (int v = 0; v < vocab; ++v) total += std::exp(row[v] - max);
    sum += max + std::log(total) - row[labels(p)];
    ++counted;
  }
  REQUIRE(counted < B * T);  // some predictions are at a separator
  const double loss = trainer.step();
  INFO("trainer " << loss << ", truth " << sum / counted << " over " << counted);
  CHECK(std::abs(loss - sum / counted) <= 1e-12 * std::abs(loss));
}
