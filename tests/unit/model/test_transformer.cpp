// The decoder-only transformer as model layers: finite-difference checks in
// double of the embedding, a decoder block with either attention path, the
// head and the whole model with its loss; causality of the whole model; the
// two attention paths against each other in float; and the memory estimate
// against what a built transformer stage stashes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/loss.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;
using kernels::AttentionPath;
using kpipe::test::numeric_gradient;
using kpipe::test::random_matrix;
using kpipe::test::relative_error;

namespace {

constexpr double tolerance = 1e-6;

// 4 layers: embedding, two blocks, head. He initialisation keeps the values
// O(1), which suits finite differences better than GPT-2's 0.02.
ModelSpec tiny_transformer(config::InitKind init = config::InitKind::he) {
  return test::small_transformer(7, 5, init, 17);
}

// The same shape of either language-model family.
ModelSpec tiny_model(const std::string& kind, config::InitKind init = config::InitKind::he) {
  if (kind == "transformer") return tiny_transformer(init);
  ModelSpec spec = test::small_llama(7, 5, 17);
  spec.init = init;
  return spec;
}

// rows x T token ids in [0, vocab), as the data feed delivers them.
template <class Scalar>
tensor::Matrix<Scalar> token_ids(int rows, const ModelSpec& spec, std::uint64_t seed) {
  std::vector<Scalar> ids(static_cast<std::size_t>(rows) * spec.context);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<Scalar>(kernels::random_bits(seed, i) % static_cast<std::uint64_t>(spec.vocab));
  }
  auto out = tensor::uninitialized_matrix<Scalar>("test::ids", rows, spec.context);
  Kokkos::deep_copy(
      out, Kokkos::View<const Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace>(ids.data(), rows, spec.context));
  return out;
}

// A stage's options and its footprint's query under pipeline.recompute = `recompute`.
StageOptions stage_options(AttentionPath attention, config::Recompute recompute) {
  StageOptions options{{kernels::GemmPath::vendor, attention}, recompute == config::Recompute::full};
  options.selective_recompute = recompute == config::Recompute::selective;
  return options;
}
FootprintQuery footprint_query(int rows, AttentionPath attention, config::Recompute recompute) {
  FootprintQuery query{rows, 1, false, TensorSplit::none, false, attention};
  query.selective_recompute = recompute == config::Recompute::selective;
  return query;
}

tensor::Labels next_tokens(int predictions, int vocab) {
  tensor::Labels labels("test::labels", predictions);
  Kokkos::parallel_for(
      "test::labels", predictions, KOKKOS_LAMBDA(int i) { labels(i) = (3 * i + 1) % vocab; });
  return labels;
}

// The parameter gradients of `layer` (and its input gradient unless
// `input_gradient` is false: token ids have none) against central
// differences of sum(layer(X) * R).
void check_layer(Layer<double>& layer, const tensor::Matrix<double>& X, bool input_gradient) {
  const int rows = X.extent_int(0);
  const auto R = random_matrix(rows, layer.output_dim(), 2);
  auto Y = tensor::uninitialized_matrix<double>("test::y", rows, layer.output_dim());
  auto dX = input_gradient ? tensor::uninitialized_matrix<double>("test::dx", rows, layer.input_dim())
                           : tensor::Matrix<double>();
  for (const auto& p : layer.parameters()) Kokkos::deep_copy(p.grad, 0.0);
  Context ctx;
  layer.forward({X}, {Y}, &ctx);
  layer.backward_input({R}, {input_gradient ? tensor::Tensor(dX) : tensor::Tensor()}, ctx);
  layer.backward_weight(ctx);
  CHECK(ctx.bytes() == 0);
  const auto objective = [&] {
    layer.forward({X}, {Y}, nullptr);
    return test::weighted_sum(Y, R);
  };
  if (input_gradient) {
    INFO("input gradient");
    CHECK(relative_error(tensor::to_host<double>(dX), numeric_gradient(X, objective)) < tolerance);
  }
  for (const auto& p : layer.parameters()) {
    INFO(p.name);
    CHECK(relative_error(tensor::to_host<double>(p.grad), numeric_gradient(p.value, objective)) < tolerance);
  }
}

// The mean next-token loss of a whole-model stage on fixed tokens:
// gradients() runs F and BW once, the call operator the loss alone (the
// function finite differences probe).
class TokenLoss {
 public:
  TokenLoss(tensor::ExecContext& exec, Stage<double>& stage, const ModelSpec& spec, int rows)
      : exec_(exec),
        stage_(stage),
        spec_(spec),
        X_(token_ids<double>(rows, spec, 9)),
        targets_(make_targets<double>(spec, rows)),
        Y_(tensor::uninitialized_matrix<double>("test::y", rows, spec.output_dim)),
        dY_(tensor::uninitialized_matrix<double>("test::dy", rows, spec.output_dim)),
        scale_(mean_loss_factor(spec, rows)) {
    targets_.labels = next_tokens(rows * spec.context, spec.vocab);
  }

  void gradients() {
    stage_.zero_grad();
    stage_.forward(0, X_, Y_);
    loss_and_gradient(exec_, spec_.loss, Y_, targets_, scale_, dY_);
    stage_.backward(0, dY_, tensor::Matrix<double>());
  }

  double operator()() {
    stage_.forward_no_grad(X_, Y_);
    return loss_and_gradient(exec_, spec_.loss, Y_, targets_, scale_, dY_);
  }

 private:
  tensor::ExecContext& exec_;
  Stage<double>& stage_;
  const ModelSpec& spec_;
  tensor::Matrix<double> X_;
  Targets<double> targets_;
  tensor::Matrix<double> Y_, dY_;
  double scale_;
};

}  // namespace

TEST_CASE("transformer and llama layers match finite differences", "[model][transformer][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  const auto spec = tiny_model(GENERATE(std::string("transformer"), std::string("llama")));
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const KernelChoice kernels{kernels::GemmPath::vendor, attention};
  const int rows = 3;
  INFO(spec.kind << ", attention " << (attention == AttentionPath::gemm ? "gemm" : "fused"));
  SECTION("embedding") {
    const auto layer = make_layer<double>(spec, 0, kernels, {exec, collectives});
    check_layer(*layer, token_ids<double>(rows, spec, 5), false);
  }
  SECTION("decoder block") {
    const auto layer = make_layer<double>(spec, 1, kernels, {exec, collectives});
    check_layer(*layer, random_matrix(rows, layer->input_dim(), 1, -2, 2), true);
  }
  SECTION("head") {
    const auto layer = make_layer<double>(spec, 3, kernels, {exec, collectives});
    check_layer(*layer, random_matrix(rows, layer->input_dim(), 1, -2, 2), true);
  }
}

TEST_CASE("a whole transformer or llama with its loss matches finite differences", "[model][transformer][gradients]") {
  tensor::ExecContext exec;
  const auto spec = tiny_model(GENERATE(std::string("transformer"), std::string("llama")));
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  INFO(spec.kind);
  const int rows = 2;
  Stage<double> stage(spec, {0, spec.layer_count()}, {{kernels::GemmPath::vendor, attention}, false}, exec);
  // Embeddings of order one: GPT-2's 0.02 puts the first norm where its
  // curvature (1/std) makes central differences too coarse.
  std::uint64_t table = 40;
  for (const auto& p : stage.parameters()) {
    if (p.name.rfind("layer0.", 0) == 0) kernels::fill_uniform(exec.space(), table++, -1, 1, p.value);
  }
  TokenLoss loss(exec, stage, spec, rows);
  loss.gradients();
  // At initialisation the loss is near ln(vocab): the head's logits are small.
  CHECK(std::abs(loss() - std::log(spec.vocab)) < 1.0);
  for (const auto& p : stage.parameters()) {
    INFO(p.name);
    CHECK(relative_error(tensor::to_host<double>(p.grad), numeric_gradient(p.value, std::ref(loss))) < tolerance);
  }
}

TEST_CASE("a tied LM head shares the token table: one matrix, the sum of both gradients",
          "[model][transformer][gradients]") {
  tensor::ExecContext exec;
  auto spec = tiny_transformer();
  spec.head_bias = false;
  spec.tie_embeddings = true;
  spec.vocab_divisible_by = 4;  // 7 padded to 8: the padding row stays out of both uses
  spec.output_dim = spec.context * spec.padded_vocab(1);
  const int rows = 2;
  Stage<double> stage(spec, {0, spec.layer_count()}, {{kernels::GemmPath::vendor, AttentionPath::gemm}, false}, exec);
  const auto parameters = stage.parameters();
  using Tie = Parameter<double>::Tie;
  const auto owner = std::find_if(parameters.begin(), parameters.end(), [](auto& p) { return p.tie == Tie::owner; });
  const auto copy = std::find_if(parameters.begin(), parameters.end(), [](auto& p) { return p.tie == Tie::copy; });
  REQUIRE(owner != parameters.end());
  REQUIRE(copy != parameters.end());
  CHECK(owner->name == token_table_parameter);
  CHECK(copy->name == owner->name);
  // Drawn alike: the head starts as the table (padding row zero in both), and no bias.
  CHECK(tensor::to_host<double>(copy->value) == tensor::to_host<double>(owner->value));
  CHECK(std::none_of(parameters.begin(), parameters.end(), [](auto& p) {
    return p.name.find(".bias") != p.name.npos && p.name.find("lm_head") != p.name.npos;
  }));
  // Order-one values, as in the untied check, in both copies.
  kernels::fill_uniform(exec.space(), 40, -1, 1, owner->value);
  kernels::fill_uniform(exec.space(), 41, -1, 1, parameters[1].value);
  Kokkos::deep_copy(Kokkos::subview(owner->value, std::make_pair(spec.vocab, 8), Kokkos::ALL), 0.0);
  Kokkos::deep_copy(copy->value, owner->value);
  TokenLoss shared_loss(exec, stage, spec, rows);
  shared_loss.gradients();
  CHECK_FALSE(sum_tied_gradients(exec, parameters));  // both ends here: nothing left to send
  CHECK(tensor::to_host<double>(copy->grad) == tensor::to_host<double>(owner->grad));

  // The loss as a function of the one shared matrix: both copies move together.
  const auto loss = [&] {
    Kokkos::deep_copy(copy->value, owner->value);
    return shared_loss();
  };
  const auto real_rows = Kokkos::subview(owner->value, std::make_pair(0, spec.vocab), Kokkos::ALL);
  const auto numeric = numeric_gradient(tensor::Matrix<double>(real_rows), loss);
  auto analytic = tensor::to_host<double>(owner->grad);
  analytic.resize(numeric.size());  // the real rows come first
  CHECK(relative_error(analytic, numeric) < tolerance);
}

TEST_CASE("position t of a transformer or llama never depends on later tokens", "[model][transformer]") {
  tensor::ExecContext exec;
  const auto spec = tiny_model(GENERATE(std::string("transformer"), std::string("llama")), config::InitKind::gpt2);
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  Stage<double> stage(spec, {0, spec.layer_count()}, {{kernels::GemmPath::vendor, attention}, false}, exec);
  const int rows = 2;
  const auto X = token_ids<double>(rows, spec, 4);
  const auto before = tensor::uninitialized_matrix<double>("before", rows, spec.output_dim);
  const auto after = tensor::uninitialized_matrix<double>("after", rows, spec.output_dim);
  stage.forward_no_grad(X, before);
  const auto original = tensor::to_host<double>(before);
  for (int t = 0; t + 1 < spec.context; ++t) {
    INFO("tokens after position " << t << " changed");
    auto changed = tensor::to_host<double>(X);
    for (int s = 0; s < rows; ++s) {
      for (int u = t + 1; u < spec.context; ++u) {
        auto& id = changed[static_cast<std::size_t>(s * spec.context + u)];
        id = std::fmod(id + 1 + u, spec.vocab);
      }
    }
    const auto X2 = tensor::uninitialized_matrix<double>("X2", rows, spec.context);
    Kokkos::deep_copy(
        X2, Kokkos::View<const double**, Kokkos::LayoutRight, Kokkos::HostSpace>(changed.data(), rows, spec.context));
    stage.forward_no_grad(X2, after);
    const auto logits = tensor::to_host<double>(after);
    int same = 0, later_changed = 0;
    for (int s = 0; s < rows; ++s) {
      for (int u = 0; u < spec.context; ++u) {
        for (int v = 0; v < spec.vocab; ++v) {
          const auto e = static_cast<std::size_t>((s * spec.context + u) * spec.vocab + v);
          if (u <= t) same += logits[e] == original[e];
          if (u > t) later_changed += logits[e] != original[e];
        }
      }
    }
    CHECK(same == rows * (t + 1) * spec.vocab);  // bitwise the same up to t
    CHECK(later_changed > 0);                    // and the change is seen after t
  }
}

TEST_CASE("fused and GEMM attention give the same transformer in float", "[model][transformer]") {
  tensor::ExecContext exec;
  const auto spec = tiny_transformer(config::InitKind::gpt2);
  const int rows = 3;
  const auto X = token_ids<float>(rows, spec, 8);
  std::vector<std::vector<float>> outputs, gradients;
  for (const auto attention : {AttentionPath::gemm, AttentionPath::fused}) {
    Stage<float> stage(spec, {0, spec.layer_count()}, {{kernels::GemmPath::vendor, attention}, false}, exec);
    const auto Y = tensor::uninitialized_matrix<float>("Y", rows, spec.output_dim);
    const auto dY = random_matrix<float>(rows, spec.output_dim, 12);
    stage.zero_grad();
    stage.forward(0, X, Y);
    stage.backward(0, dY, tensor::Matrix<float>());
    outputs.push_back(tensor::to_host<float>(Y));
    gradients.push_back(test::gradients_of(stage.parameters()));
  }
  const auto max_difference = [](const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0, size = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
      size = std::max(size, static_cast<double>(std::abs(a[i])));
    }
    return worst / std::max(size, 1e-30);
  };
  CHECK(max_difference(outputs[0], outputs[1]) < 1e-5);
  CHECK(max_difference(gradients[0], gradients[1]) < 1e-5);
}

// Selective recomputation rebuilds the gemm attention's probabilities in B
// with the kernels F ran: the same outputs, input and weight gradients, bit
// for bit, in every precision, with less stashed from F to B.
TEST_CASE("selective recomputation gives bitwise the transformer stage of none, stashing less",
          "[model][transformer][memory]") {
  const auto spec = tiny_transformer(config::InitKind::gpt2);
  const auto precision = GENERATE(kernels::Precision::fp32, kernels::Precision::bf16, kernels::Precision::fp16);
  INFO(kernels::name_of(precision));
  constexpr int rows = 3, microbatches = 2;
  const LayerRange range{1, spec.layer_count() - 1};
  struct Run {
    std::vector<float> outputs, input_gradients, gradients;
    std::size_t stashed = 0;
  };
  const auto run = [&](config::Recompute recompute) {
    tensor::ExecContext exec;
    StageOptions options = stage_options(AttentionPath::gemm, recompute);
    options.kernels.precision = precision;
    Stage<float> stage(spec, range, options, exec);
    stage.zero_grad();
    Run result;
    for (int mb = 0; mb < microbatches; ++mb) {
      const auto Y = tensor::uninitialized_matrix<float>("Y", rows, stage.output_dim());
      stage.forward(mb, random_matrix<float>(rows, stage.input_dim(), 30 + mb), Y);
      const auto y = tensor::to_host<float>(Y);
      result.outputs.insert(result.outputs.end(), y.begin(), y.end());
    }
    result.stashed = stage.stashed_bytes();
    for (int mb = 0; mb < microbatches; ++mb) {
      const auto dX = tensor::uninitialized_matrix<float>("dX", rows, stage.input_dim());
      stage.backward_input(mb, random_matrix<float>(rows, stage.output_dim(), 40 + mb), dX);
      stage.backward_weight(mb);
      const auto dx = tensor::to_host<float>(dX);
      result.input_gradients.insert(result.input_gradients.end(), dx.begin(), dx.end());
    }
    result.gradients = parameters_to_host(stage.parameters());
    return result;
  };
  const Run none = run(config::Recompute::none), selective = run(config::Recompute::selective);
  CHECK(selective.outputs == none.outputs);
  CHECK(selective.input_gradients == none.input_gradients);
  CHECK(selective.gradients == none.gradients);
  CHECK(std::any_of(none.gradients.begin(), none.gradients.end(), [](float g) { return g != 0; }));
  // Each microbatch's probabilities: heads x T x T per sequence and block, in the stored type.
  const std::size_t stored = precision == kernels::Precision::fp32 ? 4 : 2;
  const std::size_t probabilities = static_cast<std::size_t>(rows) * spec.heads * spec.context * spec.context;
  CHECK(none.stashed - selective.stashed == microbatches * (range.count - 1) * probabilities * stored);
}

TEST_CASE("a transformer stage's estimated footprint is what it holds", "[model][transformer][memory]") {
  const auto spec = tiny_transformer();
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const auto recompute = GENERATE(config::Recompute::none, config::Recompute::selective, config::Recompute::full);
  const int layers = spec.layer_count();
  constexpr int rows = 2;
  for (const LayerRange range : {LayerRange{0, layers}, LayerRange{0, 2}, LayerRange{1, layers - 1}}) {
    INFO("layers [" << range.first << ", " << range.end() << ") recompute " << config::name_of(recompute));
    tensor::ExecContext exec;
    Stage<double> stage(spec, range, stage_options(attention, recompute), exec);
    const StageFootprint footprint =
        stage_footprint(spec, range, footprint_query(rows, attention, recompute), recompute == config::Recompute::full);
    CHECK(footprint.parameters == test::parameter_elements(stage));
    const auto X =
        range.first == 0 ? token_ids<double>(rows, spec, 2) : random_matrix<double>(rows, stage.input_dim(), 5);
    const auto Y = tensor::uninitialized_matrix<double>("Y", rows, stage.output_dim());
    stage.forward(0, X, Y);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == footprint.stash_per_microbatch * 8);
    const auto dX = range.first == 0 ? tensor::Matrix<double>()
                                     : tensor::uninitialized_matrix<double>("dX", rows, stage.input_dim());
    stage.backward_input(0, random_matrix<double>(rows, stage.output_dim(), 6), dX);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == footprint.kept_for_weight_gradient * 8);
  }
}

// bf16 and fp16 keep everything a transformer saves in 2 bytes but the token
// ids, LayerNorm's 1/std and attention's log-sum-exp: a built float stage
// stashes what activation_bytes predicts, exactly.
TEST_CASE("a reduced-precision transformer stage stashes the bytes its footprint predicts",
          "[model][transformer][memory][bf16][fp16]") {
  const auto spec = tiny_transformer();
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const auto precision = GENERATE(kernels::Precision::fp32, kernels::Precision::bf16, kernels::Precision::fp16);
  const auto recompute = GENERATE(config::Recompute::none, config::Recompute::selective, config::Recompute::full);
  const int layers = spec.layer_count();
  constexpr int rows = 2;
  for (const LayerRange range : {LayerRange{0, layers}, LayerRange{1, layers - 1}}) {
    INFO(kernels::name_of(precision) << " layers [" << range.first << ", " << range.end() << ") recompute "
                                     << config::name_of(recompute));
    tensor::ExecContext exec;
    StageOptions options = stage_options(attention, recompute);
    options.kernels.precision = precision;
    Stage<float> stage(spec, range, options, exec);
    const StageFootprint footprint =
        stage_footprint(spec, range, footprint_query(rows, attention, recompute), recompute == config::Recompute::full);
    const ActivationBytes bytes = activation_bytes(footprint, 4, precision == kernels::Precision::fp32 ? 4 : 2);
    const auto X =
        range.first == 0 ? token_ids<float>(rows, spec, 2) : random_matrix<float>(rows, stage.input_dim(), 5);
    const auto Y = tensor::uninitialized_matrix<float>("Y", rows, stage.output_dim());
    stage.forward(0, X, Y);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == bytes.stash);
    const auto dX =
        range.first == 0 ? tensor::Matrix<float>() : tensor::uninitialized_matrix<float>("dX", rows, stage.input_dim());
    stage.backward_input(0, random_matrix<float>(rows, stage.output_dim(), 6), dX);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == bytes.kept);
  }
}

// Packed documents (data.pack_documents): two sequences of T = 40 (across the
// fused kernel's 32-row tiles) holding documents closed by token 0. Each
// document's logits are those of the document alone at the start of a
// sequence (the positions after it, which it cannot see, filled with other
// tokens), so the packed loss, taken within documents, is the sum of the
// documents' losses; and changing one document leaves the others bitwise.
TEST_CASE("on packed documents each document's logits are its own alone", "[model][transformer][documents]") {
  tensor::ExecContext exec;
  const std::string kind = GENERATE(std::string("transformer"), std::string("llama"));
  const auto attention = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  INFO(kind << ", " << (attention == AttentionPath::gemm ? "gemm" : "fused") << " attention");
  constexpr int separator = 0;
  ModelSpec spec =
      kind == "transformer" ? test::small_transformer(7, 40, config::InitKind::gpt2, 17) : test::small_llama(7, 40, 17);
  const int T = spec.context, vocab = spec.vocab;
  const std::vector<std::vector<int>> lengths{{9, 23, 8}, {17, 23}};
  const int rows = static_cast<int>(lengths.size());
  // Documents of tokens 1..vocab-1, each closed by the separator.
  std::vector<double> tokens;
  for (const auto& sequence : lengths) {
    for (int n : sequence) {
      for (int p = 0; p + 1 < n; ++p) tokens.push_back(1 + (tokens.size() * 5 + p) % (vocab - 1));
      tokens.push_back(separator);
    }
  }
  const auto device_ids = [&](const std::vector<double>& ids, int sequences) {
    auto X = tensor::uninitialized_matrix<double>("test::ids", sequences, T);
    Kokkos::deep_copy(X,
                      Kokkos::View<const double**, Kokkos::LayoutRight, Kokkos::HostSpace>(ids.data(), sequences, T));
    return X;
  };
  Documents documents(separator);
  StageOptions packed_options{{kernels::GemmPath::vendor, attention}, false};
  packed_options.documents = &documents;
  Stage<double> packed(spec, {0, spec.layer_count()}, packed_options, exec);
  Stage<double> plain(spec, {0, spec.layer_count()}, {{kernels::GemmPath::vendor, attention}, false}, exec);
  const auto packed_logits = [&](const std::vector<double>& ids) {
    const auto X = device_ids(ids, rows);
    documents.assign<double>(exec.space(), X);
    const auto Y = tensor::uninitialized_matrix<double>("test::y", rows, spec.output_dim);
    packed.forward_no_grad(X, Y);
    return tensor::to_host<double>(Y);
  };
  const auto logits = packed_logits(tokens);

  // Σ over positions p of [first, first + n) but the last of -log softmax(logits)[next token].
  const auto loss = [&](const std::vector<double>& y, const std::vector<double>& ids, int first, int n) {
    double sum = 0;
    for (int p = first; p + 1 < first + n; ++p) {
      const double* row = &y[static_cast<std::size_t>(p) * vocab];
      const double max = *std::max_element(row, row + vocab);
      double total = 0;
      for (int v = 0; v < vocab; ++v) total += std::exp(row[v] - max);
      sum += max + std::log(total) - row[static_cast<int>(ids[p + 1])];
    }
    return sum;
  };
  double packed_loss = 0, documents_loss = 0;
  int first = 0;
  for (const auto& sequence : lengths) {
    for (int n : sequence) {
      INFO("document at " << first << " of " << n << " tokens");
      std::vector<double> alone(tokens.begin() + first, tokens.begin() + first + n);
      for (int p = n; p < T; ++p) alone.push_back(1 + p % (vocab - 1));
      const auto Y = tensor::uninitialized_matrix<double>("test::y", 1, spec.output_dim);
      plain.forward_no_grad(device_ids(alone, 1), Y);
      const auto own = tensor::to_host<double>(Y);
      const std::vector<double> part(logits.begin() + first * vocab, logits.begin() + (first + n) * vocab);
      CHECK(relative_error(part, std::vector<double>(own.begin(), own.begin() + n * vocab)) < 1e-12);
      packed_loss += loss(logits, tokens, first, n);
      documents_loss += loss(own, alone, 0, n);
      first += n;
    }
  }
  CHECK(std::abs(packed_loss - documents_loss) <= 1e-12 * documents_loss);

  // And its gradient: the packed sequences' parameter gradients are the sum of the documents'.
  // d loss / d logits at positions [first, first + n - 1) of y into dY: softmax - one-hot.
  const auto loss_gradient = [&](const std::vector<double>& y, const std::vector<double>& ids, int first, int n,
                                 std::vector<double>& dY) {
    for (int p = first; p + 1 < first + n; ++p) {
      const double* row = &y[static_cast<std::size_t>(p) * vocab];
      const double max = *std::max_element(row, row + vocab);
      double total = 0;
      for (int v = 0; v < vocab; ++v) total += std::exp(row[v] - max);
      for (int v = 0; v < vocab; ++v) dY[static_cast<std::size_t>(p) * vocab + v] = std::exp(row[v] - max) / total;
      dY[static_cast<std::size_t>(p) * vocab + static_cast<int>(ids[p + 1])] -= 1;
    }
  };
  const auto device_gradient = [&](const std::vector<double>& dY, int sequences) {
    auto G = tensor::uninitialized_matrix<double>("test::dy", sequences, spec.output_dim);
    Kokkos::deep_copy(
        G, Kokkos::View<const double**, Kokkos::LayoutRight, Kokkos::HostSpace>(dY.data(), sequences, spec.output_dim));
    return G;
  };
  std::vector<double> dY_packed(logits.size(), 0.0);
  packed.zero_grad();
  plain.zero_grad();
  first = 0;
  for (const auto& sequence : lengths) {
    for (int n : sequence) {
      loss_gradient(logits, tokens, first, n, dY_packed);
      std::vector<double> alone(tokens.begin() + first, tokens.begin() + first + n);
      for (int p = n; p < T; ++p) alone.push_back(1 + p % (vocab - 1));
      const auto X = device_ids(alone, 1);
      const auto Y = tensor::uninitialized_matrix<double>("test::y", 1, spec.output_dim);
      plain.forward(0, X, Y);
      std::vector<double> dY(static_cast<std::size_t>(spec.output_dim), 0.0);
      loss_gradient(tensor::to_host<double>(Y), alone, 0, n, dY);
      plain.backward(0, device_gradient(dY, 1), tensor::Matrix<double>());
      first += n;
    }
  }
  const auto X = device_ids(tokens, rows);
  documents.assign<double>(exec.space(), X);
  const auto Y = tensor::uninitialized_matrix<double>("test::y", rows, spec.output_dim);
  packed.forward(0, X, Y);
  packed.backward(0, device_gradient(dY_packed, rows), tensor::Matrix<double>());
  CHECK(relative_error(test::gradients_of(packed.parameters()), test::gradients_of(plain.parameters())) < 1e-12);

  // The middle document of the first sequence changed: the others' logits are bitwise the same.
  auto changed = tokens;
  for (int p = 9; p < 9 + 22; ++p) changed[p] = 1 + (static_cast<int>(changed[p]) + 2) % (vocab - 1);
  const auto after = packed_logits(changed);
  const auto same = [&](int from, int to) {
    return std::equal(logits.begin() + from * vocab, logits.begin() + to * vocab, after.begin() + from * vocab);
  };
  CHECK(same(0, 9));
  CHECK(same(9 + 23, 2 * T));
  CHECK_FALSE(same(9, 9 + 23));
}
