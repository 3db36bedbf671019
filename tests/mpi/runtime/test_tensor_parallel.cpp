// The tensor-parallel building blocks on a tensor group of every rank of the
// job: GridCollectives sums in rank order (bitwise the same on every rank)
// and gathers along axis 0; the vocabulary-parallel cross-entropy over
// column shards of the logits equals the plain softmax cross-entropy of the
// whole logits (float64), in loss and gradient, without gathering them.
#include <fmt/format.h>

#include <cmath>
#include <random>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/loss.hpp"
#include "kpipe/model/training/loss.hpp"
#include "kpipe/runtime/execution/grid_collectives.hpp"
#include "relative_error.hpp"

using namespace kpipe;
using kpipe::test::relative_error;

namespace {

// Values every rank can compute: value(rank, i).
double value(int rank, int i) { return std::sin(1.0 + rank * 7.0 + i) * std::pow(10.0, (i % 5) - 2); }

}  // namespace

TEST_CASE("grid collectives sum in rank order and gather along axis 0", "[runtime][tensor_parallel]") {
  const int t = comm::size_of(comm::world());
  const comm::ProcessGrid grid(comm::world(), 1, t, 1);
  tensor::ExecContext exec;
  runtime::GridCollectives collectives(grid, exec);
  const int me = collectives.rank(model::Group::tensor);
  CHECK(collectives.size(model::Group::tensor) == t);
  CHECK(collectives.size(model::Group::data) == 1);

  std::vector<double> mine(6);
  for (int i = 0; i < 6; ++i) mine[i] = value(me, i);
  const auto buffer = tensor::uninitialized_matrix<double>("buffer", 2, 3);
  tensor::from_host<double>(mine, buffer);
  collectives.all_reduce_sum(model::Group::tensor, buffer);
  const auto summed = tensor::to_host<double>(buffer);
  for (int i = 0; i < 6; ++i) {
    double expected = value(0, i);
    for (int r = 1; r < t; ++r) expected += value(r, i);  // rank order
    CHECK(summed[i] == expected);
  }
  // Every rank holds bitwise the same sum.
  CHECK(comm::all_gather(comm::world(), summed) == [&] {
    std::vector<double> copies;
    for (int r = 0; r < t; ++r) copies.insert(copies.end(), summed.begin(), summed.end());
    return copies;
  }());

  const auto local = tensor::uninitialized_matrix<float>("local", 2, 3);
  tensor::from_host<float>(std::vector<float>(mine.begin(), mine.end()), local);
  const auto gathered = tensor::uninitialized_matrix<float>("gathered", 2 * t, 3);
  collectives.all_gather(model::Group::tensor, local, gathered);
  const auto all = tensor::to_host<float>(gathered);
  for (int r = 0; r < t; ++r) {
    for (int i = 0; i < 6; ++i) CHECK(all[r * 6 + i] == static_cast<float>(value(r, i)));
  }
  const auto wrong = tensor::uninitialized_matrix<float>("wrong", 2, 3);
  if (t > 1) CHECK_THROWS_AS(collectives.all_gather(model::Group::tensor, local, wrong), kpipe::Error);
}

// Sequence parallelism's sum: rank r keeps rows [r·n/t, (r+1)·n/t) of the
// rank-order sum, bitwise those rows of all_reduce_sum.
TEST_CASE("grid collectives reduce-scatter: each rank its rows of the rank-order sum", "[runtime][tensor_parallel]") {
  const int t = comm::size_of(comm::world());
  const comm::ProcessGrid grid(comm::world(), 1, t, 1);
  tensor::ExecContext exec;
  runtime::GridCollectives collectives(grid, exec);
  const int me = collectives.rank(model::Group::tensor);
  constexpr int rows = 2, columns = 3;  // each rank's share
  const int n = rows * columns;
  std::vector<double> mine(static_cast<std::size_t>(t) * n);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = value(me, static_cast<int>(i));
  const auto whole = tensor::uninitialized_matrix<double>("whole", rows * t, columns);
  const auto local = tensor::uninitialized_matrix<double>("local", rows, columns);
  tensor::from_host<double>(mine, whole);
  collectives.reduce_scatter_sum(model::Group::tensor, whole, local);
  const auto kept = tensor::to_host<double>(local);
  for (int i = 0; i < n; ++i) {
    const int at = me * n + i;  // row-major: this rank's rows are contiguous
    double expected = value(0, at);
    for (int r = 1; r < t; ++r) expected += value(r, at);  // rank order
    CHECK(kept[i] == expected);
  }
  const auto wrong = tensor::uninitialized_matrix<double>("wrong", rows * t, columns);
  if (t > 1) CHECK_THROWS_AS(collectives.reduce_scatter_sum(model::Group::tensor, whole, wrong), kpipe::Error);
}

TEST_CASE("vocabulary-parallel cross-entropy equals the unsharded loss", "[runtime][tensor_parallel]") {
  const int t = comm::size_of(comm::world());
  const comm::ProcessGrid grid(comm::world(), 1, t, 1);
  tensor::ExecContext exec;
  runtime::GridCollectives collectives(grid, exec);
  const int me = grid.tensor_rank();
  constexpr int rows = 7, vocab = 24;  // 24 columns split over 1, 2, 3 or 4 ranks
  REQUIRE(vocab % t == 0);
  const int shard = vocab / t, first = me * shard;
  std::mt19937 random(3);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> logits(rows * vocab);
  for (double& l : logits) l = normal(random);
  logits[5] = 80.0;  // a large logit: the shifted exponentials must not overflow
  std::vector<int> labels = {0, 23, 5, 11, 12, 17, 6};
  const double scale = 1.0 / rows;

  // The whole logits through the plain kernel: the independent truth.
  const auto whole = tensor::uninitialized_matrix<double>("whole", rows, vocab);
  tensor::from_host<double>(logits, whole);
  tensor::Labels device_labels("labels", rows);
  Kokkos::deep_copy(device_labels, tensor::HostLabels(labels.data(), rows));
  const auto whole_gradient = tensor::uninitialized_matrix<double>("whole_gradient", rows, vocab);
  const double expected =
      kernels::softmax_cross_entropy<double>(exec.space(), whole, device_labels, scale, whole_gradient);
  const auto expected_gradient = tensor::to_host<double>(whole_gradient);

  std::vector<double> mine;
  for (int i = 0; i < rows; ++i)
    mine.insert(mine.end(), &logits[i * vocab + first], &logits[i * vocab + first + shard]);
  const auto local = tensor::uninitialized_matrix<double>("local", rows, shard);
  tensor::from_host<double>(mine, local);
  const auto gradient = tensor::uninitialized_matrix<double>("gradient", rows, shard);
  const double loss = model::vocab_parallel_cross_entropy<double>(exec, collectives, local, device_labels, first, vocab,
                                                                  scale, gradient);
  INFO(fmt::format("t = {}, rank {}: loss {} against {}", t, me, loss, expected));
  CHECK(std::abs(loss - expected) <= 1e-6 * std::abs(expected));
  std::vector<double> expected_shard;
  for (int i = 0; i < rows; ++i) {
    expected_shard.insert(expected_shard.end(), &expected_gradient[i * vocab + first],
                          &expected_gradient[i * vocab + first + shard]);
  }
  CHECK(relative_error(tensor::to_host<double>(gradient), expected_shard) < 1e-6);

  // Ignored labels (packed documents' boundaries) take no loss and no gradient, as in the plain kernel.
  labels[1] = labels[4] = kernels::ignored_label;
  Kokkos::deep_copy(device_labels, tensor::HostLabels(labels.data(), rows));
  const double expected_ignoring =
      kernels::softmax_cross_entropy<double>(exec.space(), whole, device_labels, scale, whole_gradient);
  const double ignoring = model::vocab_parallel_cross_entropy<double>(exec, collectives, local, device_labels, first,
                                                                      vocab, scale, gradient);
  CHECK(std::abs(ignoring - expected_ignoring) <= 1e-6 * std::abs(expected_ignoring));
  const auto ignoring_gradient = tensor::to_host<double>(gradient);
  for (int j = 0; j < shard; ++j) {
    CHECK(ignoring_gradient[1 * shard + j] == 0.0);
    CHECK(ignoring_gradient[4 * shard + j] == 0.0);
  }

  // A label outside the vocabulary makes the loss NaN on every rank.
  labels[2] = vocab;
  Kokkos::deep_copy(device_labels, tensor::HostLabels(labels.data(), rows));
  CHECK(std::isnan(model::vocab_parallel_cross_entropy<double>(exec, collectives, local, device_labels, first, vocab,
                                                               scale, gradient)));
}
