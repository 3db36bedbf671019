// Layer norm and RMSNorm against their formulas and their gradients against
// finite differences.
#include <cmath>
#include <functional>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/layer_norm.hpp"
#include "kpipe/kernels/random.hpp"
#include "relative_error.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

using kpipe::test::relative_error;

namespace {

constexpr int rows = 3;
constexpr int n = 70;  // more than a vector of lanes and a block of columns (layer_norm.cpp), with tails
constexpr double epsilon = 1e-5;

struct Inputs {
  std::vector<double> x, gamma, beta, r;  // r weighs the outputs: L = sum(Y * r)
};

Inputs random_inputs() {
  auto fill = [](int r, int c, std::uint64_t stream, double low, double high) {
    auto m = uninitialized_matrix<double>("test::input", r, c);
    fill_uniform(ExecutionSpace(), stream_key(5, stream), low, high, m);
    return to_host<double>(m);
  };
  return {fill(rows, n, 1, -2, 2), fill(1, n, 2, 0.5, 1.5), fill(1, n, 3, -1, 1), fill(rows, n, 4, -1, 1)};
}

Matrix<double> device(const std::vector<double>& values, int r, int c) {
  auto m = uninitialized_matrix<double>("test::device", r, c);
  from_host<double>(values, m);
  return m;
}

// The layer norm (or RMSNorm) of the inputs, on the host.
std::vector<double> forward(const Inputs& in, bool rms = false) {
  auto Y = uninitialized_matrix<double>("test::y", rows, n);
  auto xhat = uninitialized_matrix<double>("test::xhat", rows, n);
  auto rstd = uninitialized_matrix<double>("test::rstd", rows, 1);
  if (rms) {
    rms_norm_forward(ExecutionSpace(), device(in.x, rows, n), device(in.gamma, 1, n), epsilon, Y, xhat, rstd);
  } else {
    layer_norm_forward(ExecutionSpace(), device(in.x, rows, n), device(in.gamma, 1, n), device(in.beta, 1, n), epsilon,
                       Y, xhat, rstd);
  }
  return to_host<double>(Y);
}

double loss(const Inputs& in, bool rms = false) {
  const auto y = forward(in, rms);
  double sum = 0;
  for (std::size_t e = 0; e < y.size(); ++e) sum += y[e] * in.r[e];
  return sum;
}

// Central differences of loss() with respect to every element of `values`.
std::vector<double> numeric_gradient(Inputs in, std::vector<double> Inputs::*values, bool rms = false) {
  std::vector<double> gradient;
  const double h = 1e-5;
  for (double& v : in.*values) {
    const double saved = v;
    v = saved + h;
    const double up = loss(in, rms);
    v = saved - h;
    const double down = loss(in, rms);
    v = saved;
    gradient.push_back((up - down) / (2 * h));
  }
  return gradient;
}

}  // namespace

TEST_CASE("layer norm normalises each row and applies gamma and beta", "[kernels][layer_norm]") {
  const auto in = random_inputs();
  const auto y = forward(in);
  for (int i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int j = 0; j < n; ++j) mean += in.x[i * n + j] / n;
    for (int j = 0; j < n; ++j) var += (in.x[i * n + j] - mean) * (in.x[i * n + j] - mean) / n;
    for (int j = 0; j < n; ++j) {
      const double expected = (in.x[i * n + j] - mean) / std::sqrt(var + epsilon) * in.gamma[j] + in.beta[j];
      CHECK(y[i * n + j] == Approx(expected).epsilon(1e-14).margin(1e-14));
    }
  }
}

TEST_CASE("layer norm gradients match finite differences in double", "[kernels][layer_norm]") {
  const auto in = random_inputs();
  auto Y = uninitialized_matrix<double>("test::y", rows, n);
  auto xhat = uninitialized_matrix<double>("test::xhat", rows, n);
  auto rstd = uninitialized_matrix<double>("test::rstd", rows, 1);
  const auto gamma = device(in.gamma, 1, n);
  layer_norm_forward(ExecutionSpace(), device(in.x, rows, n), gamma, device(in.beta, 1, n), epsilon, Y, xhat, rstd);
  const auto dY = device(in.r, rows, n);
  auto dX = uninitialized_matrix<double>("test::dx", rows, n);
  layer_norm_backward_input(ExecutionSpace(), dY, xhat, rstd, gamma, dX);
  // Accumulation: start from ones, so the test sees += and not =.
  auto dgamma = uninitialized_matrix<double>("test::dgamma", 1, n);
  auto dbeta = uninitialized_matrix<double>("test::dbeta", 1, n);
  Kokkos::deep_copy(dgamma, 1.0);
  Kokkos::deep_copy(dbeta, 1.0);
  layer_norm_backward_weight(ExecutionSpace(), dY, xhat, dgamma, dbeta);
  auto minus_one = [](std::vector<double> v) {
    for (double& e : v) e -= 1.0;
    return v;
  };
  CHECK(relative_error(to_host<double>(dX), numeric_gradient(in, &Inputs::x)) < 1e-6);
  CHECK(relative_error(minus_one(to_host<double>(dgamma)), numeric_gradient(in, &Inputs::gamma)) < 1e-6);
  CHECK(relative_error(minus_one(to_host<double>(dbeta)), numeric_gradient(in, &Inputs::beta)) < 1e-6);
}

TEST_CASE("RMSNorm scales each row by its root mean square and gamma", "[kernels][layer_norm]") {
  const auto in = random_inputs();
  const auto y = forward(in, true);
  for (int i = 0; i < rows; ++i) {
    double squares = 0;
    for (int j = 0; j < n; ++j) squares += in.x[i * n + j] * in.x[i * n + j] / n;
    for (int j = 0; j < n; ++j) {
      const double expected = in.x[i * n + j] / std::sqrt(squares + epsilon) * in.gamma[j];
      CHECK(y[i * n + j] == Approx(expected).epsilon(1e-14).margin(1e-14));
    }
  }
}

TEST_CASE("RMSNorm gradients match finite differences in double", "[kernels][layer_norm]") {
  const auto in = random_inputs();
  auto Y = uninitialized_matrix<double>("test::y", rows, n);
  auto xhat = uninitialized_matrix<double>("test::xhat", rows, n);
  auto rstd = uninitialized_matrix<double>("test::rstd", rows, 1);
  const auto gamma = device(in.gamma, 1, n);
  rms_norm_forward(ExecutionSpace(), device(in.x, rows, n), gamma, epsilon, Y, xhat, rstd);
  const auto dY = device(in.r, rows, n);
  auto dX = uninitialized_matrix<double>("test::dx", rows, n);
  rms_norm_backward_input(ExecutionSpace(), dY, xhat, rstd, gamma, dX);
  auto dgamma = uninitialized_matrix<double>("test::dgamma", 1, n);
  Kokkos::deep_copy(dgamma, 1.0);  // accumulates
  rms_norm_backward_weight(ExecutionSpace(), dY, xhat, dgamma);
  std::vector<double> dgamma_added = to_host<double>(dgamma);
  for (double& e : dgamma_added) e -= 1.0;
  CHECK(relative_error(to_host<double>(dX), numeric_gradient(in, &Inputs::x, true)) < 1e-6);
  CHECK(relative_error(dgamma_added, numeric_gradient(in, &Inputs::gamma, true)) < 1e-6);
}
