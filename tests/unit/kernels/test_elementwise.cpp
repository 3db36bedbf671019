// Elementwise kernels and reductions against host formulas.
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "random_matrix.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

namespace {

template <class Scalar>
Matrix<Scalar> random_matrix(int rows, int cols, std::uint64_t stream) {
  return kpipe::test::random_matrix<Scalar>(rows, cols, stream, -3.0, 3.0);
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double relu(double x) { return x > 0 ? x : 0; }

}  // namespace

TEST_CASE("activations match their formulas, derivatives their finite differences", "[kernels][elementwise]") {
  const auto [f, formula] = GENERATE(std::pair{Activation::gelu, &gelu}, std::pair{Activation::gelu_tanh, &gelu_tanh},
                                     std::pair{Activation::relu, &relu},
                                     std::pair{Activation::tanh, static_cast<double (*)(double)>(&std::tanh)});
  const auto X = random_matrix<double>(7, 13, 1);
  const auto dY = random_matrix<double>(7, 13, 2);
  auto Y = uninitialized_matrix<double>("test::y", 7, 13);
  auto D = uninitialized_matrix<double>("test::d", 7, 13);
  auto dX = uninitialized_matrix<double>("test::dx", 7, 13);
  activation_forward(ExecutionSpace(), f, X, Y, D);
  activation_backward(ExecutionSpace(), D, dY, dX);
  auto inference = uninitialized_matrix<double>("test::inference", 7, 13);
  activation_forward(ExecutionSpace(), f, X, inference);
  const auto x = to_host<double>(X);
  const auto dy = to_host<double>(dY);
  const auto y = to_host<double>(Y);
  const auto dx = to_host<double>(dX);
  CHECK(to_host<double>(inference) == y);
  const double h = 1e-6;
  for (std::size_t e = 0; e < x.size(); ++e) {
    CHECK(y[e] == Approx(formula(x[e])).margin(1e-15));
    const double slope = (formula(x[e] + h) - formula(x[e] - h)) / (2 * h);
    CHECK(dx[e] == Approx(slope * dy[e]).epsilon(1e-7).margin(1e-9));
  }
}

TEST_CASE("bias broadcast, column sums, add, scale and norm", "[kernels][elementwise]") {
  const auto X = random_matrix<float>(5, 3, 3);
  const auto x = to_host<float>(X);
  auto Y = clone<float>("test::y", X);
  auto row = uninitialized_matrix<float>("test::row", 1, 3);
  from_host<float>({1.0f, 2.0f, 3.0f}, row);
  add_row(ExecutionSpace(), row, Y);
  add(ExecutionSpace(), Y, X, Y);
  scale(ExecutionSpace(), 0.5f, Y);
  const auto y = to_host<float>(Y);
  for (std::size_t e = 0; e < x.size(); ++e) CHECK(y[e] == 0.5f * ((x[e] + float(e % 3 + 1)) + x[e]));

  add_column_sums(ExecutionSpace(), X, row);
  const auto sums = to_host<float>(row);
  for (int j = 0; j < 3; ++j) {
    float column = 0;
    for (int i = 0; i < 5; ++i) column += x[i * 3 + j];
    CHECK(sums[j] == float(j + 1) + column);
  }
  double squares = 0;
  for (const float v : x) squares += double(v) * v;
  CHECK(squared_norm<float>(ExecutionSpace(), X) == Approx(squares).epsilon(1e-12));
}

TEST_CASE("squared_norm sums in double over several chunks", "[kernels][elementwise]") {
  // 11,137 elements: more than two host chunks, and not whole vectors.
  const auto check = [](auto scalar) {
    using Scalar = decltype(scalar);
    const auto X = random_matrix<Scalar>(37, 301, 5);
    double squares = 0;
    for (const Scalar v : to_host<Scalar>(X)) squares += double(v) * v;
    CHECK(squared_norm<Scalar>(ExecutionSpace(), X) == Approx(squares).epsilon(1e-13));
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("elementwise kernels reject other shapes and strided views", "[kernels][elementwise]") {
  const auto X = random_matrix<float>(4, 6, 4);
  auto Y = uninitialized_matrix<float>("test::y", 6, 4);
  CHECK_THROWS_WITH(add(ExecutionSpace(), X, X, Y), "sum is 6x4 but must be 4x6");
  const auto columns = Kokkos::subview(X, Kokkos::ALL, Kokkos::make_pair(0, 3));
  auto Z = uninitialized_matrix<float>("test::z", 4, 3);
  CHECK_THROWS_WITH(activation_forward<float>(ExecutionSpace(), Activation::relu, columns, Z),
                    "matrix \"test::random\" is a strided view; elementwise kernels need contiguous rows");
}
