// Optimizer updates against PyTorch's formulas, written out on the host.
#include <algorithm>
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/optimizer.hpp"
#include "kpipe/tensor/compat.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

namespace {
Matrix<double> device(const std::vector<double>& values) {
  auto m = uninitialized_matrix<double>("test::device", 1, static_cast<int>(values.size()));
  from_host<double>(values, m);
  return m;
}
}  // namespace

TEST_CASE("SGD with momentum and L2 decay follows torch.optim.SGD", "[kernels][optimizer]") {
  std::vector<double> w{1.0, -2.0, 0.5}, buffer(3, 0.0);
  const std::vector<double> g{0.3, -0.1, 0.2};
  const SgdCoefficients c{0.1, 0.9};
  const double decay = 0.01;
  auto W = device(w);
  auto V = device(buffer);
  for (int step = 0; step < 3; ++step) {
    sgd_update<double>(ExecutionSpace(), c, {{W, device(g), V, {}, decay}});
    for (int e = 0; e < 3; ++e) {
      buffer[e] = c.momentum * buffer[e] + (g[e] + decay * w[e]);
      w[e] -= c.lr * buffer[e];
    }
  }
  const auto result = to_host<double>(W);
  for (int e = 0; e < 3; ++e) CHECK(result[e] == Approx(w[e]).epsilon(1e-14));
}

TEST_CASE("AdamW is bias-corrected and decays weights decoupled from the gradient", "[kernels][optimizer]") {
  std::vector<double> w{1.0, -2.0, 0.5}, m(3, 0.0), v(3, 0.0);
  const std::vector<double> g{0.3, -0.1, 0.0};
  AdamWCoefficients c{0.01, 0.9, 0.999, 1e-8, 1};
  const double decay = 0.1;
  auto W = device(w);
  auto M = device(m);
  auto Vs = device(v);
  for (int step = 1; step <= 3; ++step) {
    c.step = step;
    adamw_update<double>(ExecutionSpace(), c, {{W, device(g), M, Vs, decay}});
    for (int e = 0; e < 3; ++e) {
      w[e] *= 1 - c.lr * decay;
      m[e] = c.beta1 * m[e] + (1 - c.beta1) * g[e];
      v[e] = c.beta2 * v[e] + (1 - c.beta2) * g[e] * g[e];
      const double m_hat = m[e] / (1 - std::pow(c.beta1, step));
      const double v_hat = v[e] / (1 - std::pow(c.beta2, step));
      w[e] -= c.lr * m_hat / (std::sqrt(v_hat) + c.epsilon);
    }
  }
  const auto result = to_host<double>(W);
  for (int e = 0; e < 3; ++e) CHECK(result[e] == Approx(w[e]).epsilon(1e-12));
  // A weight without gradient only decays.
  CHECK(result[2] == Approx(0.5 * std::pow(1 - c.lr * decay, 3)).epsilon(1e-14));
}

// Parameters of many sizes (below and above a thread's share, a bias of one
// element), each with its own decay: updated together (on a threaded host in
// one region, shares cutting through parameters), every element is what
// updating its parameter alone gives, bitwise.
TEST_CASE("an update of many parameters equals each parameter's own", "[kernels][optimizer]") {
  const int sizes[][2] = {{1, 1}, {3, 700}, {1, 5}, {64, 256}, {2, 3}};
  std::vector<ParameterUpdate<double>> together, alone;
  for (int i = 0; i < 5; ++i) {
    const auto [rows, cols] = sizes[i];
    const auto state = [&](int seed) {
      std::vector<double> values(static_cast<std::size_t>(rows) * cols);
      // Non-negative, as AdamW's second moment is.
      for (std::size_t e = 0; e < values.size(); ++e) values[e] = std::abs(std::sin(seed * 1.7 + e * 0.37));
      auto m = uninitialized_matrix<double>("test::state", rows, cols);
      from_host<double>(values, m);
      return m;
    };
    const double decay = 0.05 * i;
    together.push_back({state(i), state(10 + i), state(20 + i), state(30 + i), decay});
    alone.push_back({state(i), together.back().g, state(20 + i), state(30 + i), decay});
  }
  AdamWCoefficients adamw{0.01, 0.9, 0.999, 1e-8, 3, 0.5};
  adamw_update(ExecutionSpace(), adamw, together);
  for (const auto& p : alone) adamw_update<double>(ExecutionSpace(), adamw, {p});
  sgd_update(ExecutionSpace(), {0.1, 0.9, 0.7}, together);
  for (const auto& p : alone) sgd_update<double>(ExecutionSpace(), {0.1, 0.9, 0.7}, {p});
  for (std::size_t i = 0; i < together.size(); ++i) {
    INFO("parameter " << i);
    CHECK(to_host<double>(together[i].w) == to_host<double>(alone[i].w));
    CHECK(to_host<double>(together[i].first) == to_host<double>(alone[i].first));
    CHECK(to_host<double>(together[i].second) == to_host<double>(alone[i].second));
  }
}

// Gradients zeroed whole on the threads they name, or a deep_copy each.
TEST_CASE("zero_gradients zeroes every gradient, on named threads or not", "[kernels][optimizer]") {
  const int threads = kpipe::tensor::compat::concurrency(ExecutionSpace());
  const bool on_named_threads = GENERATE(false, true);
  std::vector<OwnedGradient<double>> gradients;
  for (int i = 0; i < 5; ++i) {
    auto g = uninitialized_matrix<double>("test::g", 1 + i, 100 * i + 3);
    Kokkos::deep_copy(g, 1.5);
    gradients.push_back({g, on_named_threads ? (i + 1) % threads : -1});
  }
  zero_gradients(ExecutionSpace(), gradients);
  for (const auto& owned : gradients) {
    const auto values = to_host<double>(owned.g);
    CHECK(std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0; }));
  }
}
