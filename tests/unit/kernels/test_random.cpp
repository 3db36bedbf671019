// Counter-based random numbers: a block of rows is the same wherever it is
// generated, and the values follow the distribution they claim (moments and
// the normal's probability within one standard deviation).
#include <cmath>
#include <set>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/random.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

TEMPLATE_TEST_CASE("normal values do not depend on where a block of rows is generated", "[kernels][random]", float,
                   double) {
  using Scalar = TestType;
  // Odd rows start inside a Box-Muller pair when the row length is odd.
  const int cols = GENERATE(8, 7, 1);
  INFO(cols << " columns");
  const auto key = stream_key(42, 3, 9);
  auto whole = uninitialized_matrix<Scalar>("test::whole", 1000, cols);
  auto tail = uninitialized_matrix<Scalar>("test::tail", 31, cols);
  fill_normal(ExecutionSpace(), key, 0, 0.0, 1.0, whole);
  fill_normal(ExecutionSpace(), key, 969, 0.0, 1.0, tail);
  const auto w = to_host<Scalar>(whole);
  CHECK(std::vector<Scalar>(w.begin() + 969 * cols, w.end()) == to_host<Scalar>(tail));

  // n values of N(0, 1): the mean within 4 / sqrt(n), the second moment within
  // 4 sqrt(2 / n), the share inside one standard deviation (0.6827) within 4
  // of its standard errors.
  const double n = static_cast<double>(w.size());
  double mean = 0, squares = 0, inside = 0;
  for (const Scalar v : w) {
    mean += v / n;
    squares += double(v) * v / n;
    inside += std::abs(v) < 1 ? 1 / n : 0;
  }
  CHECK(std::abs(mean) < 4 / std::sqrt(n));
  CHECK(std::abs(squares - 1) < 4 * std::sqrt(2 / n));
  CHECK(std::abs(inside - 0.682689) < 4 * std::sqrt(0.682689 * 0.317311 / n));
  CHECK(stream_key(42, 3, 9) != stream_key(42, 9, 3));
}

TEST_CASE("mean and standard deviation shift and scale the normal values", "[kernels][random]") {
  const auto key = stream_key(7, 1);
  auto standard = uninitialized_matrix<double>("test::standard", 20, 5);
  auto shifted = uninitialized_matrix<double>("test::shifted", 20, 5);
  fill_normal(ExecutionSpace(), key, 4, 0.0, 1.0, standard);
  fill_normal(ExecutionSpace(), key, 4, 3.0, 0.5, shifted);
  const auto z = to_host<double>(standard);
  const auto x = to_host<double>(shifted);
  for (std::size_t e = 0; e < z.size(); ++e) CHECK(x[e] == Approx(3.0 + 0.5 * z[e]).epsilon(1e-15));
}

TEST_CASE("a Gaussian mixture row is a chosen centre plus fill_normal's values, the same in any block",
          "[kernels][random]") {
  const int rows = 400, cols = 5, choices = 4;
  std::vector<float> table_host(choices * cols);
  for (std::size_t e = 0; e < table_host.size(); ++e) table_host[e] = static_cast<float>(e * e);
  auto table = uninitialized_matrix<float>("test::table", choices, cols);
  from_host<float>(table_host, table);
  const auto key = stream_key(11, 1), choice_key = stream_key(11, 2);
  auto whole = uninitialized_matrix<float>("test::whole", rows, cols);
  auto tail = uninitialized_matrix<float>("test::tail", 100, cols);
  auto normal = uninitialized_matrix<float>("test::normal", rows, cols);
  fill_normal_around<float>(ExecutionSpace(), key, 0, choice_key, table, whole);
  fill_normal_around<float>(ExecutionSpace(), key, rows - 100, choice_key, table, tail);
  fill_normal(ExecutionSpace(), key, 0, 0.0, 1.0, normal);
  const auto w = to_host<float>(whole), n = to_host<float>(normal);
  CHECK(std::vector<float>(w.begin() + (rows - 100) * cols, w.end()) == to_host<float>(tail));
  // Row i is table row c_i = random_bits(choice_key, i) mod 4 plus the standard normal values, bit for bit.
  std::vector<int> count(choices);
  for (int i = 0; i < rows; ++i) {
    const auto c = static_cast<int>(random_bits(choice_key, static_cast<std::uint64_t>(i)) % choices);
    ++count[c];
    for (int j = 0; j < cols; ++j) CHECK(w[i * cols + j] == table_host[c * cols + j] + n[i * cols + j]);
  }
  // Each of the 4 rows is taken 100 times on average (binomial sd ~8.7).
  for (const int taken : count) CHECK(std::abs(taken - rows / choices) < 4 * 8.7);
}
