// Stages: split backward (B then W) and recomputation against plain BW,
// initialisation independent of the partition, stash accounting, misuse.
#include <cstdint>
#include <string>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/tensor/compat.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;
using test::random_matrix;
using test::residual_model;

namespace {

constexpr int rows = 4;
constexpr int microbatches = 3;

struct Run {
  std::vector<double> grads;
  std::vector<std::vector<double>> input_grads;
};

// F of every microbatch, then B of every microbatch and W of every
// microbatch (GPipe with split backward), or BW per microbatch. Weight
// gradients accumulate in ascending microbatch order either way, which is
// what makes the two bitwise equal.
Run run(Stage<double>& stage, bool split) {
  std::vector<tensor::Matrix<double>> X, dY;
  for (int mb = 0; mb < microbatches; ++mb) {
    X.push_back(random_matrix(rows, stage.input_dim(), 10 + mb));
    dY.push_back(random_matrix(rows, stage.output_dim(), 20 + mb));
  }
  auto Y = tensor::uninitialized_matrix<double>("test::y", rows, stage.output_dim());
  Run result;
  result.input_grads.resize(microbatches);
  stage.zero_grad();
  for (int mb = 0; mb < microbatches; ++mb) stage.forward(mb, X[mb], Y);
  for (int mb = 0; mb < microbatches; ++mb) {
    auto dX = tensor::uninitialized_matrix<double>("test::dx", rows, stage.input_dim());
    if (split) {
      stage.backward_input(mb, dY[mb], dX);
      // The caller may reuse its buffer at once; the stage kept a copy.
      Kokkos::deep_copy(dY[mb], 1e6);
    } else {
      stage.backward(mb, dY[mb], dX);
    }
    result.input_grads[mb] = tensor::to_host<double>(dX);
  }
  if (split) {
    CHECK(stage.stashed_microbatches() == 0);
    CHECK(stage.stashed_bytes() > 0);
    for (int mb = 0; mb < microbatches; ++mb) stage.backward_weight(mb);
  }
  CHECK(stage.stashed_bytes() == 0);
  result.grads = test::gradients_of(stage.parameters());
  return result;
}

std::string runtime_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::runtime);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("B then W and recomputation give bitwise the gradients of BW", "[model][stage]") {
  tensor::ExecContext exec;
  const auto spec = residual_model();
  Stage<double> plain(spec, {1, 3}, {}, exec);
  Stage<double> split(spec, {1, 3}, {}, exec);
  Stage<double> recompute(spec, {1, 3}, {{kernels::GemmPath::vendor}, true}, exec);
  const auto reference = run(plain, false);
  const auto b_then_w = run(split, true);
  const auto recomputed = run(recompute, true);
  CHECK(b_then_w.grads == reference.grads);
  CHECK(b_then_w.input_grads == reference.input_grads);
  CHECK(recomputed.grads == reference.grads);
  CHECK(recomputed.input_grads == reference.input_grads);
  CHECK(std::any_of(reference.grads.begin(), reference.grads.end(), [](double g) { return g != 0; }));
}

// A stage of whole MLP layers spreads its W over the host threads where it
// has several (kernels on the calling thread: float64 products by CBLAS);
// with a profiling tool attached it runs layer after layer. Either way each
// layer reports once, in order, and the gradients are bitwise the same.
TEST_CASE("W over the host threads reports each layer in order and equals W layer after layer", "[model][stage]") {
  tensor::ExecContext exec;
  ModelSpec spec;
  spec.kind = "mlp";
  spec.input_dim = 6;
  spec.hidden = {16, 16, 8, 16};
  spec.output_dim = 5;
  const LayerRange layers{0, spec.layer_count()};
  Stage<double> spread(spec, layers, {{kernels::GemmPath::vendor}}, exec);
  Stage<double> in_order(spec, layers, {{kernels::GemmPath::vendor}}, exec);
  const auto reported = [&](Stage<double>& stage) {
    std::vector<int> done;
    const auto X = random_matrix(rows, stage.input_dim(), 10);
    const auto dY = random_matrix(rows, stage.output_dim(), 20);
    auto Y = tensor::uninitialized_matrix<double>("test::y", rows, stage.output_dim());
    auto dX = tensor::uninitialized_matrix<double>("test::dx", rows, stage.input_dim());
    stage.zero_grad();
    stage.forward(0, X, Y);
    stage.backward(0, dY, dX, [&](int layer) { done.push_back(layer); });
    return done;
  };
  CHECK(reported(spread) == std::vector<int>{0, 1, 2, 3, 4});
  // Each parameter names the thread its W runs on, the same for a layer's
  // weight and bias, where W is spread; none where it is not (one thread).
  const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  const auto parameters = spread.parameters();
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    INFO(parameters[k].name);
    CHECK(parameters[k].host_thread == (threads > 1 ? parameters[k - k % 2].host_thread : -1));
    CHECK(parameters[k].host_thread < threads);
    if (threads > 1) CHECK(parameters[k].host_thread >= 0);
  }
  // A tool that sees regions or kernel events keeps W on the calling thread
  // (tensor::compat::observed_by_tool); W reports the same, in order.
  namespace tools = Kokkos::Tools::Experimental;
  const tools::EventSet previous = tools::get_callbacks();
  if (GENERATE(false, true)) {
    tools::set_begin_parallel_for_callback([](const char*, std::uint32_t, std::uint64_t*) {});
  } else {
    tools::set_push_region_callback([](const char*) {});
  }
  CHECK(tensor::compat::observed_by_tool());
  CHECK(reported(in_order) == std::vector<int>{0, 1, 2, 3, 4});
  tools::set_callbacks(previous);
  CHECK(test::gradients_of(spread.parameters()) == test::gradients_of(in_order.parameters()));
}

TEST_CASE("stash accounting counts microbatches and bytes, and recompute keeps only inputs", "[model][stage]") {
  tensor::ExecContext exec;
  const auto spec = residual_model();
  const bool recompute = GENERATE(false, true);
  Stage<float> stage(spec, {0, 5}, {{kernels::GemmPath::vendor}, recompute}, exec);
  const auto X = tensor::zero_matrix<float>("test::x", rows, spec.input_dim);
  auto Y = tensor::uninitialized_matrix<float>("test::y", rows, spec.output_dim);
  for (int mb = 0; mb < microbatches; ++mb) stage.forward(mb, X, Y);
  CHECK(stage.stashed_microbatches() == microbatches);
  const std::size_t input_bytes = rows * spec.input_dim * sizeof(float);
  if (recompute) {
    CHECK(stage.stashed_bytes() == microbatches * input_bytes);
  } else {
    CHECK(stage.stashed_bytes() > 10 * microbatches * input_bytes);
  }
  const auto dY = tensor::zero_matrix<float>("test::dy", rows, spec.output_dim);
  for (int mb = 0; mb < microbatches; ++mb) stage.backward(mb, dY, tensor::Matrix<float>());
  CHECK(stage.stashed_microbatches() == 0);
  CHECK(stage.stashed_bytes() == 0);
  CHECK(stage.peak_stashed_microbatches() == microbatches);
  CHECK(stage.peak_stashed_bytes() >= microbatches * input_bytes);
}

TEST_CASE("weights depend on the seed and the global layer only", "[model][stage]") {
  tensor::ExecContext exec;
  auto spec = residual_model();
  Stage<float> whole(spec, {0, 5}, {}, exec);
  Stage<float> tail(spec, {3, 2}, {}, exec);
  const auto all = whole.parameters();
  const auto part = tail.parameters();
  REQUIRE(part.front().name == "layer3.norm.gamma");
  const auto offset = all.size() - part.size();
  for (std::size_t i = 0; i < part.size(); ++i) {
    CHECK(all[offset + i].name == part[i].name);
    CHECK(tensor::to_host<float>(all[offset + i].value) == tensor::to_host<float>(part[i].value));
  }
  spec.seed += 1;
  Stage<float> reseeded(spec, {3, 2}, {}, exec);
  CHECK(tensor::to_host<float>(reseeded.parameters()[2].value) != tensor::to_host<float>(part[2].value));
}

TEST_CASE("parameters are named by global layer", "[model][stage]") {
  tensor::ExecContext exec;
  Stage<float> stage(residual_model(), {3, 2}, {}, exec);
  std::vector<std::string> names;
  for (const auto& p : stage.parameters()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"layer3.norm.gamma", "layer3.norm.beta", "layer3.fc1.weight",
                                          "layer3.fc1.bias", "layer3.fc2.weight", "layer3.fc2.bias", "layer4.weight",
                                          "layer4.bias"});
}

TEST_CASE("actions out of order and wrong shapes are reported", "[model][stage]") {
  tensor::ExecContext exec;
  const auto spec = residual_model();
  Stage<float> stage(spec, {0, 2}, {}, exec);
  const auto X = tensor::zero_matrix<float>("test::x", rows, spec.input_dim);
  auto Y = tensor::uninitialized_matrix<float>("test::y", rows, 8);
  auto dX = tensor::uninitialized_matrix<float>("test::dx", rows, spec.input_dim);
  CHECK(runtime_error_of([&] { stage.backward_weight(0); }) ==
        "stage of layers [0, 2): backward_weight of microbatch 0 before its backward_input, or twice; each microbatch "
        "runs F, B, W once, in that order");
  stage.forward(0, X, Y);
  CHECK(runtime_error_of([&] { stage.forward(0, X, Y); }) ==
        "stage of layers [0, 2): forward of microbatch 0 while it is still stashed; run its backward first");
  CHECK_THROWS_WITH(stage.forward(1, X, tensor::zero_matrix<float>("test::wrong", rows, 5)),
                    "stage output is 4x5 but must be 4x8");
  CHECK_THROWS_WITH(stage.backward_input(0, tensor::zero_matrix<float>("test::wrong", 3, 8), dX),
                    "stage output gradient is 3x8 but must be 4x8");
  stage.backward_input(0, Y, dX);
  CHECK(runtime_error_of([&] { stage.backward_input(0, Y, dX); }) ==
        "stage of layers [0, 2): backward_input of microbatch 0 before its forward, or twice; each microbatch runs F, "
        "B, W once, in that order");
  stage.backward_weight(0);
  CHECK(stage.stashed_bytes() == 0);
}
