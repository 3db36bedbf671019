// Optimizer updates against PyTorch's formulas, written out on the host.
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/optimizer.hpp"

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
  const SgdCoefficients c{0.1, 0.9, 0.01};
  auto W = device(w);
  auto V = device(buffer);
  for (int step = 0; step < 3; ++step) {
    sgd_update(ExecutionSpace(), c, W, device(g), V);
    for (int e = 0; e < 3; ++e) {
      buffer[e] = c.momentum * buffer[e] + (g[e] + c.weight_decay * w[e]);
      w[e] -= c.lr * buffer[e];
    }
  }
  const auto result = to_host<double>(W);
  for (int e = 0; e < 3; ++e) CHECK(result[e] == Approx(w[e]).epsilon(1e-14));
}

TEST_CASE("AdamW is bias-corrected and decays weights decoupled from the gradient", "[kernels][optimizer]") {
  std::vector<double> w{1.0, -2.0, 0.5}, m(3, 0.0), v(3, 0.0);
  const std::vector<double> g{0.3, -0.1, 0.0};
  AdamWCoefficients c{0.01, 0.9, 0.999, 1e-8, 0.1, 1};
  auto W = device(w);
  auto M = device(m);
  auto Vs = device(v);
  for (int step = 1; step <= 3; ++step) {
    c.step = step;
    adamw_update(ExecutionSpace(), c, W, device(g), M, Vs);
    for (int e = 0; e < 3; ++e) {
      w[e] *= 1 - c.lr * c.weight_decay;
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
  CHECK(result[2] == Approx(0.5 * std::pow(1 - c.lr * c.weight_decay, 3)).epsilon(1e-14));
}
