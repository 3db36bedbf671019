// Loss kernels against their formulas and finite differences.
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/loss.hpp"
#include "kpipe/kernels/random.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

namespace {

Matrix<double> device(const std::vector<double>& values, int rows, int cols) {
  auto m = uninitialized_matrix<double>("test::device", rows, cols);
  from_host<double>(values, m);
  return m;
}

Labels labels(const std::vector<int>& values) {
  Labels l("test::labels", values.size());
  const auto host = Kokkos::create_mirror_view(l);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(l, host);
  return l;
}

std::vector<double> random_values(int count, std::uint64_t stream) {
  auto m = uninitialized_matrix<double>("test::values", 1, count);
  fill_uniform(ExecutionSpace(), stream_key(9, stream), -2, 2, m);
  return to_host<double>(m);
}

// loss(values) and the kernel's gradient, against central differences.
template <class Loss>
double gradient_error(std::vector<double> values, const Loss& loss, const std::vector<double>& analytic) {
  const double h = 1e-5;
  double diff = 0, size = 0;
  for (std::size_t e = 0; e < values.size(); ++e) {
    const double saved = values[e];
    values[e] = saved + h;
    const double up = loss(values);
    values[e] = saved - h;
    const double down = loss(values);
    values[e] = saved;
    const double numeric = (up - down) / (2 * h);
    diff = std::max(diff, std::abs(analytic[e] - numeric));
    size = std::max(size, std::abs(numeric));
  }
  return diff / size;
}

constexpr int rows = 4;
constexpr int classes = 5;
constexpr double scale = 0.125;

}  // namespace

TEST_CASE("softmax cross-entropy matches its formula and finite differences", "[kernels][loss]") {
  const auto logits = random_values(rows * classes, 1);
  const auto targets = labels({0, 3, 4, 1});
  auto gradient = uninitialized_matrix<double>("test::grad", rows, classes);
  const auto loss = [&](const std::vector<double>& z) {
    return softmax_cross_entropy(ExecutionSpace(), device(z, rows, classes), targets, scale, gradient);
  };
  const double value = loss(logits);
  const auto analytic = to_host<double>(gradient);

  const int label[rows] = {0, 3, 4, 1};
  double expected = 0;
  for (int i = 0; i < rows; ++i) {
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(logits[i * classes + j]);
    expected += scale * (std::log(sum) - logits[i * classes + label[i]]);
  }
  CHECK(value == Approx(expected).epsilon(1e-14));
  CHECK(gradient_error(logits, loss, analytic) < 1e-6);
}

TEST_CASE("softmax cross-entropy stays finite for huge logits and flags bad labels", "[kernels][loss]") {
  auto gradient = uninitialized_matrix<float>("test::grad", 1, 3);
  auto logits = uninitialized_matrix<float>("test::logits", 1, 3);
  from_host<float>({1e4f, -1e4f, 0.0f}, logits);
  CHECK(softmax_cross_entropy(ExecutionSpace(), logits, labels({1}), 1.0f, gradient) == Approx(2e4));
  CHECK(to_host<float>(gradient) == std::vector<float>{1.0f, -1.0f, 0.0f});
  CHECK(std::isnan(softmax_cross_entropy(ExecutionSpace(), logits, labels({3}), 1.0f, gradient)));
}

// Packed documents: an ignored label's row takes no loss and a zero gradient;
// the other rows are what they are with any label there.
TEST_CASE("softmax cross-entropy ignores ignored_label rows", "[kernels][loss][documents]") {
  const auto logits = device(random_values(rows * classes, 4), rows, classes);
  auto all = uninitialized_matrix<double>("test::all", rows, classes);
  auto some = uninitialized_matrix<double>("test::some", rows, classes);
  softmax_cross_entropy(ExecutionSpace(), logits, labels({0, 3, 4, 1}), scale, all);
  const auto row_loss = [&](int i, int label) {
    const auto z = to_host<double>(logits);
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[i * classes + j]);
    return scale * (std::log(sum) - z[i * classes + label]);
  };
  const double value =
      softmax_cross_entropy(ExecutionSpace(), logits, labels({0, ignored_label, 4, ignored_label}), scale, some);
  CHECK(value == Approx(row_loss(0, 0) + row_loss(2, 4)).epsilon(1e-14));
  const auto expected = to_host<double>(all), got = to_host<double>(some);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < classes; ++j) {
      INFO("row " << i << ", column " << j);
      CHECK(got[i * classes + j] == (i % 2 == 0 ? expected[i * classes + j] : 0.0));
    }
  }
  CHECK(std::isnan(softmax_cross_entropy(ExecutionSpace(), logits, labels({0, -2, 4, 1}), scale, some)));
}

TEST_CASE("mean squared error matches its formula and finite differences", "[kernels][loss]") {
  const auto outputs = random_values(rows * classes, 2);
  const auto target_values = random_values(rows * classes, 3);
  const auto targets = device(target_values, rows, classes);
  auto gradient = uninitialized_matrix<double>("test::grad", rows, classes);
  const auto loss = [&](const std::vector<double>& y) {
    return mean_squared_error(ExecutionSpace(), device(y, rows, classes), targets, scale, gradient);
  };
  const double value = loss(outputs);
  const auto analytic = to_host<double>(gradient);
  double expected = 0;
  for (std::size_t e = 0; e < outputs.size(); ++e) {
    expected += scale * (outputs[e] - target_values[e]) * (outputs[e] - target_values[e]) / classes;
  }
  CHECK(value == Approx(expected).epsilon(1e-14));
  CHECK(gradient_error(outputs, loss, analytic) < 1e-6);
}
