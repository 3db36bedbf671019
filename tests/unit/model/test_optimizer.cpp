// The model-level optimizer: state per parameter, and global-norm clipping
// against its formula.
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/model/optimizer.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

Parameter<double> parameter(const std::string& name, const std::vector<double>& value,
                            const std::vector<double>& grad) {
  const int n = static_cast<int>(value.size());
  Parameter<double> p{name, tensor::uninitialized_matrix<double>("test::value", 1, n),
                      tensor::uninitialized_matrix<double>("test::grad", 1, n)};
  tensor::from_host<double>(value, p.value);
  tensor::from_host<double>(grad, p.grad);
  return p;
}

}  // namespace

TEST_CASE("gradients are clipped to the global norm like clip_grad_norm_", "[model][optimizer]") {
  tensor::ExecContext exec;
  const std::vector<Parameter<double>> params{parameter("layer0.weight", {1, 2}, {3, 0}),
                                              parameter("layer0.bias", {0}, {-4})};
  const auto squares = gradient_squared_norms(exec, params);
  CHECK(squares == std::vector<double>{9, 16});
  const double norm = global_norm(squares);
  CHECK(norm == 5);
  CHECK(clip_gradients(exec, params, norm, 10.0) == 1.0);
  CHECK(tensor::to_host<double>(params[0].grad) == std::vector<double>{3, 0});

  const double factor = clip_gradients(exec, params, norm, 2.5);
  CHECK(factor == Approx(2.5 / (5 + 1e-6)).epsilon(1e-15));
  CHECK(tensor::to_host<double>(params[0].grad)[0] == Approx(3 * factor).epsilon(1e-15));
  CHECK(tensor::to_host<double>(params[1].grad)[0] == Approx(-4 * factor).epsilon(1e-15));
  CHECK(global_norm(gradient_squared_norms(exec, params)) == Approx(2.5).epsilon(1e-6));
}

TEST_CASE("optimizer state is named per parameter as in PyTorch", "[model][optimizer]") {
  tensor::ExecContext exec;
  const std::vector<Parameter<double>> params{parameter("layer2.weight", {1, 2}, {0.5, -0.5})};
  OptimizerSpec spec;
  spec.kind = OptimizerKind::sgd;
  spec.lr = 0.1;
  spec.momentum = 0.5;
  Optimizer<double> sgd(spec, params, exec);
  sgd.step();
  sgd.step();
  CHECK(sgd.steps() == 2);
  const auto state = sgd.state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == "layer2.weight.momentum_buffer");
  // v1 = g, v2 = 0.5 g + g; w = w0 - 0.1 (v1 + v2)
  CHECK(tensor::to_host<double>(state[0].value) == std::vector<double>{0.75, -0.75});
  CHECK(tensor::to_host<double>(params[0].value)[0] == Approx(1 - 0.1 * (0.5 + 0.75)).epsilon(1e-15));

  spec.kind = OptimizerKind::adamw;
  const Optimizer<double> adamw(spec, params, exec);
  std::vector<std::string> names;
  for (const auto& s : adamw.state()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"layer2.weight.exp_avg", "layer2.weight.exp_avg_sq"});
}
