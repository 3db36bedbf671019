// Synthetic data: a pure function of (seed, step, sample), whatever the block.
#include <set>
#include <vector>

#include "catch.hpp"
#include "kpipe/model/data/synthetic.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

DataSpec spec(Task task) {
  DataSpec s;
  s.task = task;
  s.seed = 42;
  s.input_dim = 6;
  s.output_dim = 4;
  return s;
}

template <class Scalar>
std::vector<Scalar> inputs(const SyntheticData<Scalar>& data, std::int64_t step, std::int64_t first, int rows) {
  auto X = tensor::uninitialized_matrix<Scalar>("test::x", rows, 6);
  data.fill_inputs(step, first, X);
  return tensor::to_host<Scalar>(X);
}

std::vector<int> labels(const SyntheticData<float>& data, std::int64_t step, std::int64_t first, int rows) {
  const auto targets = make_targets<float>(LossKind::cross_entropy, rows, 4);
  data.fill_targets(step, first, targets);
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets.labels);
  return std::vector<int>(host.data(), host.data() + rows);
}

}  // namespace

TEST_CASE("a sample is the same whichever block generates it", "[model][synthetic]") {
  tensor::ExecContext exec;
  const SyntheticData<float> data(spec(Task::classification), exec);
  const auto all = inputs(data, 3, 0, 64);
  const auto tail = inputs(data, 3, 40, 24);
  CHECK(std::vector<float>(all.begin() + 40 * 6, all.end()) == tail);
  CHECK(inputs(data, 4, 0, 64) != all);
  const auto all_labels = labels(data, 3, 0, 64);
  CHECK(std::vector<int>(all_labels.begin() + 40, all_labels.end()) == labels(data, 3, 40, 24));
  // A second generator with the same seed is the same generator.
  CHECK(inputs(SyntheticData<float>(spec(Task::classification), exec), 3, 40, 24) == tail);
}

TEST_CASE("classification labels use every class", "[model][synthetic]") {
  tensor::ExecContext exec;
  const SyntheticData<float> data(spec(Task::classification), exec);
  const auto l = labels(data, 0, 0, 256);
  const std::set<int> seen(l.begin(), l.end());
  CHECK(seen == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("regression targets are the same for any block and vary with the input", "[model][synthetic]") {
  tensor::ExecContext exec;
  const SyntheticData<double> data(spec(Task::regression), exec);
  auto all = make_targets<double>(LossKind::mse, 32, 4);
  auto tail = make_targets<double>(LossKind::mse, 8, 4);
  data.fill_targets(1, 0, all);
  data.fill_targets(1, 24, tail);
  const auto a = tensor::to_host<double>(all.values);
  CHECK(std::vector<double>(a.begin() + 24 * 4, a.end()) == tensor::to_host<double>(tail.values));
  CHECK(std::set<double>(a.begin(), a.end()).size() == a.size());
}

TEST_CASE("targets of inputs the caller holds equal the targets drawn afresh", "[model][synthetic]") {
  tensor::ExecContext exec;
  const SyntheticData<float> classes(spec(Task::classification), exec);
  auto X = tensor::uninitialized_matrix<float>("test::x", 40, 6);
  classes.fill_inputs(5, 8, X);
  const auto kept = make_targets<float>(LossKind::cross_entropy, 40, 4);
  classes.fill_targets_of_inputs(5, 8, X, kept);
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), kept.labels);
  CHECK(std::vector<int>(host.data(), host.data() + 40) == labels(classes, 5, 8, 40));

  const SyntheticData<double> values(spec(Task::regression), exec);
  auto Xd = tensor::uninitialized_matrix<double>("test::x", 16, 6);
  values.fill_inputs(2, 3, Xd);
  auto of_inputs = make_targets<double>(LossKind::mse, 16, 4);
  auto drawn = make_targets<double>(LossKind::mse, 16, 4);
  values.fill_targets_of_inputs(2, 3, Xd, of_inputs);
  values.fill_targets(2, 3, drawn);
  CHECK(tensor::to_host<double>(of_inputs.values) == tensor::to_host<double>(drawn.values));
  // They are the inputs' targets, not the positions': other inputs, other targets.
  values.fill_inputs(9, 3, Xd);
  values.fill_targets_of_inputs(2, 3, Xd, of_inputs);
  CHECK(tensor::to_host<double>(of_inputs.values) != tensor::to_host<double>(drawn.values));
}
