// HDF5 datasets as a data source: the reader, the per-epoch shuffle, the
// split of a global batch over replicas and microbatches, and the test split
// in file order. The dataset is written at test time (tests/support).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "tiny_dataset.hpp"

using namespace kpipe;

namespace {

constexpr int train_rows = 20, test_rows = 8, features = 3, classes = 4;

struct TinyFile {
  std::string path = "kpipe-test-dataset-" + std::to_string(::getpid()) + ".h5";
  TinyFile() { test::write_tiny_dataset(path, train_rows, test_rows, features, classes); }
  ~TinyFile() { std::remove(path.c_str()); }
};

config::RunConfig config_for(const std::string& path, int d, int input_dim = features, int output_dim = classes,
                             const std::string& task = "classification") {
  return config::run_config(config::parse_deck(
      fmt::format("model.input_dim = {}\nmodel.hidden = [5]\nmodel.output_dim = {}\ntrain.global_batch = 8\n"
                  "train.microbatch_size = 2\npipeline.stages = 1\npipeline.data_parallel = {}\n"
                  "data.source = \"hdf5\"\ndata.path = \"{}\"\ndata.seed = 11\ndata.task = \"{}\"\n"
                  "model.loss = \"{}\"\n",
                  input_dim, output_dim, d, path, task, task == "classification" ? "cross_entropy" : "mse"),
      "test.toml"));
}

// The dataset rows (feature 0) and labels of `count` positions from `first` of `step`.
std::pair<std::vector<int>, std::vector<int>> draw(const model::DataSource<float>& source, std::int64_t step,
                                                   std::int64_t first, int count) {
  const auto X = tensor::uninitialized_matrix<float>("test::X", count, features);
  const auto targets = model::make_targets<float>(model::LossKind::cross_entropy, count, classes);
  source.fill_inputs(step, first, X);
  source.fill_targets(step, first, targets);
  const auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), X);
  const auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets.labels);
  std::vector<int> rows, labels;
  for (int i = 0; i < count; ++i) {
    rows.push_back(static_cast<int>(x(i, 0)));
    CHECK(x(i, 2) == test::tiny_feature(rows.back(), 2));
    labels.push_back(y(i));
  }
  return {rows, labels};
}

}  // namespace

TEST_CASE("dataset file: validated layout and rows by hyperslab", "[runtime][dataset]") {
  const TinyFile tiny;
  const io::DatasetFile file(tiny.path, io::Split::train);
  CHECK(file.rows() == train_rows);
  CHECK(file.features() == features);
  CHECK(file.has_labels());
  CHECK(file.outputs() == classes);
  const std::vector<std::int64_t> rows{7, 2, 19};
  std::vector<float> x(rows.size() * features);
  std::vector<int> y(rows.size());
  file.read_features(rows.data(), rows.size(), x.data());
  file.read_labels(rows.data(), rows.size(), y.data());
  CHECK(x == std::vector<float>{test::tiny_feature(7, 0), test::tiny_feature(7, 1), test::tiny_feature(7, 2),
                                test::tiny_feature(2, 0), test::tiny_feature(2, 1), test::tiny_feature(2, 2),
                                test::tiny_feature(19, 0), test::tiny_feature(19, 1), test::tiny_feature(19, 2)});
  CHECK(y == std::vector<int>{7 % classes, 2 % classes, 19 % classes});
  const std::int64_t outside = train_rows;
  CHECK_THROWS_AS(file.read_labels(&outside, 1, y.data()), Error);
  CHECK(io::DatasetFile(tiny.path, io::Split::test).rows() == test_rows);
}

TEST_CASE("epoch permutation: a reproducible shuffle per (seed, epoch)", "[runtime][dataset]") {
  const auto a = runtime::epoch_permutation(11, 0, 1000);
  CHECK(a == runtime::epoch_permutation(11, 0, 1000));
  CHECK(a != runtime::epoch_permutation(11, 1, 1000));
  CHECK(a != runtime::epoch_permutation(12, 0, 1000));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) CHECK(sorted[i] == i);
  CHECK(a != sorted);
}

TEST_CASE("dataset source: replicas take contiguous slices of each epoch's shuffle", "[runtime][dataset]") {
  const TinyFile tiny;
  const auto config = config_for(tiny.path, 2);
  const auto spec = model::TrainerSpec::from_config(config);
  tensor::ExecContext exec;
  const auto source = runtime::make_data_source<float>(config.data, spec, io::Split::train, exec);
  CHECK(source->samples() == train_rows);
  const auto epoch0 = runtime::epoch_permutation(11, 0, train_rows);
  const auto epoch1 = runtime::epoch_permutation(11, 1, train_rows);
  // Steps 0..4 of B = 8 cover stream positions 0..39: epochs 0 and 1, each every row once.
  std::vector<int> seen;
  for (int step = 0; step < 5; ++step) {
    for (int replica = 0; replica < 2; ++replica) {
      for (int mb = 0; mb < 2; ++mb) {
        const int first = replica * 4 + mb * 2;
        const auto [rows, labels] = draw(*source, step, first, 2);
        for (int i = 0; i < 2; ++i) {
          const int position = step * 8 + first + i;
          const auto expected = position < train_rows ? epoch0[position] : epoch1[position - train_rows];
          CHECK(rows[i] == expected);
          CHECK(labels[i] == rows[i] % classes);
          seen.push_back(rows[i]);
        }
      }
    }
  }
  CHECK(std::set<int>(seen.begin(), seen.begin() + train_rows).size() == train_rows);
  CHECK(std::set<int>(seen.begin() + train_rows, seen.end()).size() == train_rows);
  // A fresh source (a restart) draws the same rows for any (step, position), in any order.
  const auto again = runtime::make_data_source<float>(config.data, spec, io::Split::train, exec);
  CHECK(draw(*again, 3, 4, 2).first == draw(*source, 3, 4, 2).first);
}

TEST_CASE("dataset source: inference reads the test split in order", "[runtime][dataset]") {
  const TinyFile tiny;
  const auto config = config_for(tiny.path, 1);
  const auto spec = model::TrainerSpec::from_config(config);
  tensor::ExecContext exec;
  const auto source = runtime::make_data_source<float>(config.data, spec, io::Split::test, exec);
  CHECK(source->samples() == test_rows);
  CHECK(draw(*source, 0, 0, 8).first == std::vector<int>{20, 21, 22, 23, 24, 25, 26, 27});
}

TEST_CASE("dataset source: float targets for regression", "[runtime][dataset]") {
  const std::string path = "kpipe-test-regression-" + std::to_string(::getpid()) + ".h5";
  test::write_tiny_dataset(path, train_rows, test_rows, features, 0, 2);
  const auto config = config_for(path, 1, features, 2, "regression");
  const auto spec = model::TrainerSpec::from_config(config);
  tensor::ExecContext exec;
  const auto source = runtime::make_data_source<float>(config.data, spec, io::Split::test, exec);
  const auto targets = model::make_targets<float>(model::LossKind::mse, 4, 2);
  source->fill_targets(0, 4, targets);  // test rows 4..7 of the split: numbered 24..27
  const auto values = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets.values);
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 2; ++t) CHECK(values(i, t) == test::tiny_feature(24 + i, t));
  }
  std::remove(path.c_str());
}

TEST_CASE("dataset source: the model must fit the file", "[runtime][dataset]") {
  const TinyFile tiny;
  tensor::ExecContext exec;
  for (const auto& [input_dim, output_dim, task] :
       {std::tuple{features + 1, classes, "classification"}, std::tuple{features, classes + 1, "classification"},
        std::tuple{features, classes, "regression"}}) {
    const auto config = config_for(tiny.path, 1, input_dim, output_dim, task);
    const auto spec = model::TrainerSpec::from_config(config);
    try {
      runtime::make_data_source<float>(config.data, spec, io::Split::train, exec);
      FAIL("no error");
    } catch (const Error& error) {
      INFO(error.what());
      CHECK(error.exit_code() == 2);
    }
  }
}
