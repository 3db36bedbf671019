// Finite-difference checks in double of every layer, both losses (in the
// kernels tests) and whole 6-layer models with their loss.
#include <memory>
#include <string>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/rotary_qkv.hpp"
#include "kpipe/model/layers/swiglu_layer.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/loss.hpp"

using namespace kpipe;
using namespace kpipe::model;
using kpipe::test::numeric_gradient;
using kpipe::test::random_matrix;
using kpipe::test::relative_error;

namespace {

constexpr double tolerance = 1e-6;

// B and W of `layer` against central differences of sum(layer(X) * R); what
// F saves is what the layer declares.
void check_layer(Layer<double>& layer, int rows) {
  const auto X = random_matrix(rows, layer.input_dim(), 1, -2, 2);
  const auto R = random_matrix(rows, layer.output_dim(), 2);
  auto Y = tensor::uninitialized_matrix<double>("test::y", rows, layer.output_dim());
  auto dX = tensor::uninitialized_matrix<double>("test::dx", rows, layer.input_dim());
  for (const auto& p : layer.parameters()) Kokkos::deep_copy(p.grad, 0.0);
  Context ctx;
  layer.forward({X}, {Y}, &ctx);
  CHECK(ctx.saved_specs() == layer.saved(rows));
  layer.backward_input({R}, {dX}, ctx);
  layer.backward_weight(ctx);
  CHECK(ctx.bytes() == 0);

  const auto objective = [&] {
    layer.forward({X}, {Y}, nullptr);
    return test::weighted_sum(Y, R);
  };
  {
    INFO("input gradient");
    CHECK(relative_error(tensor::to_host<double>(dX), numeric_gradient(X, objective)) < tolerance);
  }
  for (const auto& p : layer.parameters()) {
    INFO(p.name);
    CHECK(relative_error(tensor::to_host<double>(p.grad), numeric_gradient(p.value, objective)) < tolerance);
  }
}

ModelSpec small_model(const std::string& kind) {
  ModelSpec spec;
  spec.kind = kind;
  spec.input_dim = 4;
  spec.hidden = kind == "mlp" ? std::vector<int>{5, 6, 5, 4, 5} : std::vector<int>{5, 5, 5, 5};
  spec.output_dim = 3;
  spec.seed = 7;
  return spec;
}

}  // namespace

TEST_CASE("Linear gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  Linear<double> layer(5, 3, "linear", kernels::stream_key(1, 2), WeightInit::of(config::InitKind::uniform, 5, 3),
                       KernelChoice{}, {exec, collectives});
  // A non-zero bias, so the check sees it enter the output.
  kernels::fill_uniform(exec.space(), 99, -1, 1, layer.parameters()[1].value);
  check_layer(layer, 4);
}

TEST_CASE("activation gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  const auto f = GENERATE(kernels::Activation::gelu, kernels::Activation::gelu_tanh, kernels::Activation::relu,
                          kernels::Activation::tanh);
  SerialCollectives collectives(exec);
  ActivationLayer<double> layer(f, 6, {exec, collectives});
  check_layer(layer, 3);
}

TEST_CASE("LayerNorm gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  LayerNorm<double> layer(6, "norm", {exec, collectives});
  kernels::fill_uniform(exec.space(), 5, 0.5, 1.5, layer.parameters()[0].value);
  kernels::fill_uniform(exec.space(), 6, -1, 1, layer.parameters()[1].value);
  check_layer(layer, 3);
}

TEST_CASE("RMSNorm gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  LayerNorm<double> layer(6, "norm", {exec, collectives}, {Normalisation::rms, 1e-6});
  CHECK(std::string(layer.kind()) == "rms_norm");
  REQUIRE(layer.parameters().size() == 1);  // gamma: RMSNorm has no beta
  kernels::fill_uniform(exec.space(), 5, 0.5, 1.5, layer.parameters()[0].value);
  check_layer(layer, 3);
}

TEST_CASE("rotary QKV (grouped-query) gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  // Two sequences of T = 3: 2 KV heads of 2 query heads each, hd = 4.
  RotaryQKV<double> layer({3, 2, 2, 4}, 100.0, {exec, collectives});
  check_layer(layer, 6);
}

TEST_CASE("SwiGLU gradients match finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  SwiGLU<double> layer(7, {exec, collectives});
  check_layer(layer, 3);
}

TEST_CASE("every layer kind of both model families matches finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  const std::string kind = GENERATE("mlp", "residual_mlp");
  const auto spec = small_model(kind);
  SerialCollectives collectives(exec);
  for (int index = 0; index < spec.layer_count(); ++index) {
    INFO("layer " << index);
    const auto layer = make_layer<double>(spec, index, {kernels::GemmPath::portable}, {exec, collectives});
    check_layer(*layer, 3);
  }
}

TEST_CASE("a whole 6-layer model with its loss matches finite differences", "[model][gradients]") {
  tensor::ExecContext exec;
  auto spec = small_model(GENERATE(std::string("mlp"), std::string("residual_mlp")));
  spec.loss = GENERATE(LossKind::cross_entropy, LossKind::mse);
  spec.activation = GENERATE(config::ActivationKind::gelu, config::ActivationKind::tanh);
  REQUIRE(spec.layer_count() == 6);
  const int rows = 5;
  Stage<double> stage(spec, {0, 6}, {}, exec);
  const auto X = random_matrix(rows, spec.input_dim, 3, -2, 2);
  auto targets = make_targets<double>(spec.loss, rows, spec.output_dim);
  if (spec.loss == LossKind::cross_entropy) {
    Kokkos::parallel_for(
        "test::labels", rows, KOKKOS_LAMBDA(int i) { targets.labels(i) = i % 3; });
  } else {
    targets.values = random_matrix(rows, spec.output_dim, 4);
  }
  auto Y = tensor::uninitialized_matrix<double>("test::y", rows, spec.output_dim);
  auto dY = tensor::uninitialized_matrix<double>("test::dy", rows, spec.output_dim);
  auto dX = tensor::uninitialized_matrix<double>("test::dx", rows, spec.input_dim);
  const double scale = 1.0 / rows;

  stage.zero_grad();
  stage.forward(0, X, Y);
  loss_and_gradient(exec, spec.loss, Y, targets, scale, dY);
  stage.backward(0, dY, dX);

  const auto loss = [&] {
    stage.forward_no_grad(X, Y);
    return loss_and_gradient(exec, spec.loss, Y, targets, scale, dY);
  };
  {
    INFO("input gradient");
    CHECK(relative_error(tensor::to_host<double>(dX), numeric_gradient(X, loss)) < tolerance);
  }
  for (const auto& p : stage.parameters()) {
    INFO(p.name);
    CHECK(relative_error(tensor::to_host<double>(p.grad), numeric_gradient(p.value, loss)) < tolerance);
  }
}
