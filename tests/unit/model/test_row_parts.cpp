// Row-wise layers (Layer::row_wise) and a Sequential that splits F and B into
// row parts: the parts cover every row once, and the outputs, input
// gradients and weight gradients are those of the whole microbatch. Lanes
// (several microbatches at once) give every bit of one after the other.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/layers/activation_layer.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/sequential.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;
using kpipe::test::random_matrix;
using kpipe::test::relative_error;

namespace {

// Y = 2 X, row-wise or not, recording the rows each call of its F and B computed.
class RowRecorder final : public Layer<double> {
 public:
  RowRecorder(int dim, bool row_wise) : dim_(dim), row_wise_(row_wise) {}

  const char* kind() const override { return "row_recorder"; }
  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context*) const override {
    twice(inputs, outputs, RowRange::all_of(inputs.at(0)), forward_rows_);
  }
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context&) const override {
    twice(output_grads, input_grads, RowRange::all_of(output_grads.at(0)), backward_rows_);
  }
  void backward_weight(Context&) override {}  // nothing, so on any thread
  bool backward_weight_on_any_thread() const override { return true; }
  bool row_wise() const override { return row_wise_; }
  void forward_begin(tensor::TensorList, tensor::TensorList, Context*) const override { ++begins_; }
  void forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context*, RowRange rows,
                    const tensor::ExecutionSpace&) const override {
    twice(inputs, outputs, rows, forward_rows_);
  }
  void backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads, const Context&,
                           RowRange rows, const tensor::ExecutionSpace&) const override {
    twice(output_grads, input_grads, rows, backward_rows_);
  }
  void backward_input_end(tensor::TensorList, Context&) const override { ++ends_; }

  // The rows each call computed, in the order of their first row.
  std::vector<std::pair<int, int>> forward_rows() const { return sorted(forward_rows_); }
  std::vector<std::pair<int, int>> backward_rows() const { return sorted(backward_rows_); }
  int begins() const { return begins_; }
  int ends() const { return ends_; }
  // The next F or B throws (a failure part-way through a pass).
  void fail_next() { fail_next_ = true; }

 private:
  void twice(tensor::TensorList from, tensor::TensorList to, RowRange rows,
             std::vector<std::pair<int, int>>& record) const {
    if (fail_next_) {
      fail_next_ = false;
      throw std::runtime_error("row_recorder: planted failure");
    }
    const auto X = rows.of(from.at(0).matrix<double>());
    const auto Y = rows.of(to.at(0).matrix<double>());
    for (std::size_t i = 0; i < X.extent(0); ++i) {
      for (std::size_t j = 0; j < X.extent(1); ++j) Y(i, j) = 2 * X(i, j);
    }
    const std::lock_guard<std::mutex> lock(mutex_);  // parts may run on several threads at once
    record.emplace_back(rows.begin, rows.end);
  }
  static std::vector<std::pair<int, int>> sorted(std::vector<std::pair<int, int>> rows) {
    std::sort(rows.begin(), rows.end());
    return rows;
  }

  int dim_;
  bool row_wise_;
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<int, int>> forward_rows_, backward_rows_;
  mutable int begins_ = 0, ends_ = 0;
  mutable bool fail_next_ = false;
};

// [Linear, recorder, GELU], [Linear, tanh], Linear, every composite in
// `row_parts`: the hidden layers
// composites of their own, as an MLP's are, with the same weights for every
// call (keys fixed, biases non-zero).
std::unique_ptr<Sequential<double>> mlp(LayerEnvironment env, int row_parts, RowRecorder** recorder,
                                        bool recorder_row_wise = true) {
  const int widths[] = {6, 16, 8, 5};
  std::vector<std::unique_ptr<Layer<double>>> layers;
  for (int i = 0; i < 3; ++i) {
    auto linear = std::make_unique<Linear<double>>(widths[i], widths[i + 1], "linear", kernels::stream_key(7, i),
                                                   WeightInit::of(config::InitKind::uniform, widths[i], widths[i + 1]),
                                                   KernelChoice{}, env);
    kernels::fill_uniform(env.exec.space(), 40 + i, -1, 1, linear->parameters()[1].value);
    if (i == 2) {
      layers.push_back(std::move(linear));
      break;
    }
    std::vector<std::unique_ptr<Layer<double>>> hidden;
    hidden.push_back(std::move(linear));
    if (i == 0) {
      auto recording = std::make_unique<RowRecorder>(widths[1], recorder_row_wise);
      *recorder = recording.get();
      hidden.push_back(std::move(recording));
    }
    hidden.push_back(std::make_unique<ActivationLayer<double>>(
        i == 0 ? kernels::Activation::gelu : kernels::Activation::tanh, widths[i + 1], env));
    layers.push_back(std::make_unique<Sequential<double>>(std::move(hidden), env, BetweenLayers::kept, row_parts));
  }
  return std::make_unique<Sequential<double>>(std::move(layers), env, BetweenLayers::kept, row_parts);
}

// The same MLP twice, whole and in three parts (or lanes), with a recorder in each.
struct TwoMlps {
  tensor::ExecContext exec;
  SerialCollectives collectives{exec};
  RowRecorder* whole_recorder = nullptr;
  RowRecorder* parts_recorder = nullptr;
  std::unique_ptr<Sequential<double>> whole = mlp({exec, collectives}, 1, &whole_recorder);
  std::unique_ptr<Sequential<double>> parts = mlp({exec, collectives}, 3, &parts_recorder);
};

struct Pass {
  std::vector<double> y, dx, grads;
};

// F, B and W of one microbatch of `rows` rows.
Pass run(Sequential<double>& model, int rows) {
  const auto X = random_matrix(rows, model.input_dim(), 1, -2, 2);
  const auto dY = random_matrix(rows, model.output_dim(), 2);
  auto Y = tensor::uninitialized_matrix<double>("test::y", rows, model.output_dim());
  auto dX = tensor::uninitialized_matrix<double>("test::dx", rows, model.input_dim());
  for (const auto& p : model.parameters()) Kokkos::deep_copy(p.grad, 0.0);
  Context ctx;
  model.forward({X}, {Y}, &ctx);
  model.backward_input({dY}, {dX}, ctx);
  model.backward_weight(ctx);
  CHECK(ctx.bytes() == 0);
  return {tensor::to_host<double>(Y), tensor::to_host<double>(dX), test::gradients_of(model.parameters())};
}

std::vector<std::pair<int, int>> ranges(std::initializer_list<int> bounds) {
  std::vector<std::pair<int, int>> all;
  for (auto b = bounds.begin(); b + 1 != bounds.end(); ++b) all.emplace_back(*b, *(b + 1));
  return all;
}

}  // namespace

TEST_CASE("RowRange parts cover the rows once, in order, nearly equal", "[model][row_parts]") {
  CHECK(RowRange::part_of(13, 0, 3).begin == 0);
  CHECK(RowRange::part_of(13, 0, 3).end == 4);
  CHECK(RowRange::part_of(13, 1, 3).end == 8);
  CHECK(RowRange::part_of(13, 2, 3).end == 13);
  CHECK(RowRange::part_of(2, 1, 2).begin == 1);
}

// Parts of at least four rows, at most the parts asked for; each row's
// products over fewer rows may round differently in the library, hence the
// tolerance (the library sums each entry over k alike whatever the rows).
TEST_CASE("a Sequential of row-wise layers runs F and B in row parts as it does whole", "[model][row_parts]") {
  TwoMlps models;
  const int rows = 13;
  const Pass reference = run(*models.whole, rows);
  const Pass split = run(*models.parts, rows);
  CHECK(models.whole_recorder->forward_rows() == ranges({0, 13}));
  CHECK(models.parts_recorder->forward_rows() == ranges({0, 4, 8, 13}));
  CHECK(models.parts_recorder->backward_rows() == ranges({0, 4, 8, 13}));
  CHECK(models.parts_recorder->begins() == 1);
  CHECK(models.parts_recorder->ends() == 1);
  REQUIRE(split.y.size() == reference.y.size());
  REQUIRE(split.dx.size() == reference.dx.size());
  REQUIRE(split.grads.size() == reference.grads.size());
  CHECK(relative_error(split.y, reference.y) < 1e-13);
  CHECK(relative_error(split.dx, reference.dx) < 1e-13);
  CHECK(relative_error(split.grads, reference.grads) < 1e-13);
  CHECK(std::any_of(reference.grads.begin(), reference.grads.end(), [](double g) { return g != 0; }));

  // Six rows make one part of four or more: whole.
  run(*models.parts, 6);
  CHECK(models.parts_recorder->forward_rows() == std::vector<std::pair<int, int>>{{0, 4}, {0, 6}, {4, 8}, {8, 13}});
  CHECK(models.parts_recorder->begins() == 1);
}

TEST_CASE("a layer that is not row-wise keeps its Sequential whole", "[model][row_parts]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  RowRecorder* recorder = nullptr;
  auto model = mlp({exec, collectives}, 3, &recorder, false);
  run(*model, 13);
  CHECK(recorder->forward_rows() == ranges({0, 13}));
  CHECK(recorder->backward_rows() == ranges({0, 13}));
  CHECK(recorder->begins() == 0);

  LayerNorm<double> norm(4, "norm", {exec, collectives});
  CHECK_FALSE(norm.row_wise());
  const auto X = random_matrix(2, 4, 3);
  CHECK_THROWS_AS(norm.forward_rows({X}, {X}, nullptr, {0, 1}, exec.space()), std::logic_error);
}

// A Kokkos tool sees regions nest on one thread and fences every instance
// around a kernel event: a row part launching its kernels inside the region
// would wait for ever on a threaded host. Either kind of tool keeps F and B whole.
TEST_CASE("a Kokkos tool that sees regions or kernel events keeps F and B whole", "[model][row_parts]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  RowRecorder* recorder = nullptr;
  auto model = mlp({exec, collectives}, 3, &recorder);
  namespace tools = Kokkos::Tools::Experimental;
  const tools::EventSet previous = tools::get_callbacks();
  const bool kernel_events = GENERATE(false, true);
  if (kernel_events) {
    tools::set_begin_parallel_for_callback([](const char*, std::uint32_t, std::uint64_t*) {});
  } else {
    tools::set_push_region_callback([](const char*) {});
  }
  run(*model, 13);
  tools::set_callbacks(previous);
  CHECK(recorder->forward_rows() == ranges({0, 13}));
  CHECK(recorder->backward_rows() == ranges({0, 13}));
  CHECK(recorder->begins() == 0);
  run(*model, 13);
  CHECK(recorder->begins() == 1);
}

// Three microbatches in lanes (three lane threads, one after the other on a
// Serial build), split by microbatches and by layers (the MLP's three layers
// a run each, W on each run's thread), against the same model's F, B and W of
// each in turn: every output, input gradient and weight gradient bitwise,
// each microbatch's rows whole.
TEST_CASE("lanes run several microbatches' F, B and W as one after the other does", "[model][row_parts][lanes]") {
  const LaneSplit split = GENERATE(LaneSplit::microbatches, LaneSplit::layers);
  INFO((split == LaneSplit::layers ? "split by layers" : "split by microbatches"));
  TwoMlps models;
  Sequential<double>& alone = *models.whole;
  Sequential<double>& lanes = *models.parts;
  REQUIRE(lanes.runs_lanes());
  REQUIRE(lanes.splits_layers());
  if (split == LaneSplit::layers) lanes.weigh_by_layer_runs();
  const int rows = 7, count = 3;
  std::vector<tensor::Tensor> X, dY, Y, dX;
  for (int l = 0; l < count; ++l) {
    X.emplace_back(random_matrix(rows, alone.input_dim(), 10 + l, -2, 2));
    dY.emplace_back(random_matrix(rows, alone.output_dim(), 20 + l));
    Y.emplace_back(tensor::uninitialized_matrix<double>("test::y", rows, alone.output_dim()));
    dX.emplace_back(tensor::uninitialized_matrix<double>("test::dx", rows, alone.input_dim()));
  }
  for (const auto& p : alone.parameters()) Kokkos::deep_copy(p.grad, 0.0);
  for (const auto& p : lanes.parameters()) Kokkos::deep_copy(p.grad, 0.0);
  std::vector<std::vector<double>> y, dx;
  for (int l = 0; l < count; ++l) {
    Context ctx;
    alone.forward({X[l]}, {Y[l]}, &ctx);
    alone.backward_input({dY[l]}, {dX[l]}, ctx);
    alone.backward_weight(ctx);
    y.push_back(tensor::to_host<double>(Y[l].matrix<double>()));
    dx.push_back(tensor::to_host<double>(dX[l].matrix<double>()));
  }

  std::vector<Context> contexts(count);
  std::vector<Context*> pointers;
  for (auto& ctx : contexts) pointers.push_back(&ctx);
  lanes.forward_lanes(X, Y, pointers.data(), split);
  lanes.backward_input_lanes(dY, dX, pointers.data(), split);
  lanes.backward_weight(pointers.data(), pointers.size(), {});
  for (int l = 0; l < count; ++l) {
    INFO("lane " << l);
    CHECK(tensor::to_host<double>(Y[l].matrix<double>()) == y[l]);
    CHECK(tensor::to_host<double>(dX[l].matrix<double>()) == dx[l]);
    CHECK(contexts[l].bytes() == 0);
  }
  const auto grads = test::gradients_of(lanes.parameters());
  CHECK(grads == test::gradients_of(alone.parameters()));
  CHECK(std::any_of(grads.begin(), grads.end(), [](double g) { return g != 0; }));
  CHECK(models.parts_recorder->forward_rows() == std::vector<std::pair<int, int>>(count, {0, rows}));
  CHECK(models.parts_recorder->backward_rows() == std::vector<std::pair<int, int>>(count, {0, rows}));
  CHECK(models.parts_recorder->begins() == count);
  CHECK(models.parts_recorder->ends() == count);
}

TEST_CASE("a layer that is not row-wise runs no lanes", "[model][row_parts][lanes]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  RowRecorder* recorder = nullptr;
  auto model = mlp({exec, collectives}, 3, &recorder, false);
  CHECK_FALSE(model->runs_lanes());
  const auto X = random_matrix(2, model->input_dim(), 3);
  const auto Y = tensor::uninitialized_matrix<double>("test::y", 2, model->output_dim());
  Context ctx;
  Context* const contexts[] = {&ctx};
  CHECK_THROWS_AS(model->forward_lanes({X}, {Y}, contexts), std::logic_error);
  CHECK_FALSE(model->splits_layers());
}

// Each layer to the thread its parameters' middle element falls on, dealt
// out evenly: the MLP's 112, 136 and 45 elements over two threads put the
// middles (56, 180, 270.5 of 293) on threads 0, 1, 1; a lane thread per
// layer gives each its own; with one thread there is nothing to split.
TEST_CASE("lanes split by layers give each thread a run of consecutive layers", "[model][row_parts][lanes]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  RowRecorder* recorder = nullptr;
  for (const auto& [threads, splits] : {std::pair{1, false}, std::pair{2, true}, std::pair{3, true}}) {
    INFO(threads << " lane threads");
    auto model = mlp({exec, collectives}, threads, &recorder);
    CHECK(model->splits_layers() == splits);
  }
  auto two = mlp({exec, collectives}, 2, &recorder);
  two->weigh_by_layer_runs();
  std::vector<int> threads;
  for (const auto& p : two->parameters()) threads.push_back(p.host_thread);
  CHECK(threads == std::vector<int>{0, 0, 1, 1, 1, 1});  // weight and bias of each Linear
}

// A layer that throws inside a pass leaves the pass unended; the next pass
// of the same context (here none: F without one) begins afresh, and its
// outputs are those of a pass before the failure.
TEST_CASE("a pass that threw part-way leaves the next pass whole", "[model][row_parts]") {
  TwoMlps models;
  Sequential<double>& model = *models.parts;
  const auto failing = random_matrix(13, model.input_dim(), 5, -2, 2);
  const auto X = random_matrix(13, model.input_dim(), 6, -2, 2);
  const auto reference = tensor::uninitialized_matrix<double>("test::reference", 13, model.output_dim());
  model.forward({X}, {reference}, nullptr);
  const auto unused = tensor::uninitialized_matrix<double>("test::unused", 13, model.output_dim());
  models.parts_recorder->fail_next();
  CHECK_THROWS_WITH(model.forward({failing}, {unused}, nullptr), "row_recorder: planted failure");
  const auto Y = tensor::uninitialized_matrix<double>("test::y", 13, model.output_dim());
  Kokkos::deep_copy(Y, 0.0);
  model.forward({X}, {Y}, nullptr);
  CHECK(tensor::to_host<double>(Y) == tensor::to_host<double>(reference));
}
