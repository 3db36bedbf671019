// The model-level optimizer: state per parameter, global-norm clipping
// against its formula, exact roll-back (train.post_validation), and shards
// of it (train.distributed_optimizer) against the whole.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/model/training/optimizer.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

Parameter<double> parameter(const std::string& name, const std::vector<double>& value,
                            const std::vector<double>& grad) {
  const int n = static_cast<int>(value.size());
  Parameter<double> p{name, tensor::uninitialized_matrix<double>("test::value", 1, n),
                      tensor::uninitialized_matrix<double>("test::grad", 1, n)};
  tensor::from_host<double>(value, p.value);
  tensor::from_host<double>(grad, p.grad);
  return p;
}

}  // namespace

TEST_CASE("the clip factor is clip_grad_norm_'s, and the update reads the gradient times it", "[model][optimizer]") {
  tensor::ExecContext exec;
  const std::vector<Parameter<double>> params{parameter("layer0.weight", {1, 2}, {3, 0}),
                                              parameter("layer0.bias", {0}, {-4})};
  const auto squares = gradient_squared_norms(exec, params);
  CHECK(squares == std::vector<double>{9, 16});
  const double norm = global_norm(squares);
  CHECK(norm == 5);
  CHECK(clip_factor(norm, 10.0) == 1.0);
  CHECK(clip_factor(norm, 0.0) == 1.0);  // 0 disables clipping
  const double factor = clip_factor(norm, 2.5);
  CHECK(factor == 2.5 / (5 + 1e-6));
  CHECK(std::isnan(clip_factor(std::nan(""), 2.5)));  // a NaN norm poisons the update, as in PyTorch

  // Reading g times the factor is bitwise scaling g in place first (what
  // clip_grad_norm_ does), and leaves g as it was, for both optimizers.
  for (const auto kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    OptimizerSpec spec;
    spec.kind = kind;
    spec.lr = 0.1;
    spec.weight_decay = 0.01;
    const auto fused = parameter("layer0.weight", {1, 2, -0.5}, {0.3, -7, 1.1});
    const auto scaled = parameter("layer0.weight", {1, 2, -0.5}, {0.3 * 0.37, -7 * 0.37, 1.1 * 0.37});
    Optimizer<double> a(spec, {fused}, exec);
    Optimizer<double> b(spec, {scaled}, exec);
    for (int step = 0; step < 3; ++step) {
      a.step(0.37);
      b.step();
    }
    CHECK(tensor::to_host<double>(fused.value) == tensor::to_host<double>(scaled.value));
    CHECK(tensor::to_host<double>(fused.grad) == std::vector<double>{0.3, -7, 1.1});
  }
}

TEST_CASE("a rolled-back update restores weights, state and count bitwise", "[model][optimizer]") {
  tensor::ExecContext exec;
  for (const auto kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    OptimizerSpec spec;
    spec.kind = kind;
    spec.lr = 0.05;
    spec.warmup_steps = 3;  // the learning rate follows the update count
    const auto rolled = parameter("layer0.weight", {1, 2, -0.5}, {0.3, -7, 1.1});
    const auto direct = parameter("layer0.weight", {1, 2, -0.5}, {0.3, -7, 1.1});
    Optimizer<double> a(spec, {rolled}, exec);
    Optimizer<double> b(spec, {direct}, exec);
    a.keep_previous();
    // a: guesses factor 1, rolls back, redoes with 0.25; b: 0.25 at once.
    for (int step = 0; step < 3; ++step) {
      a.step(1.0);
      a.roll_back();
      a.step(0.25);
      b.step(0.25);
    }
    CHECK(a.steps() == 3);
    CHECK(tensor::to_host<double>(rolled.value) == tensor::to_host<double>(direct.value));
    const auto state_a = a.state();
    const auto state_b = b.state();
    REQUIRE(state_a.size() == state_b.size());
    for (std::size_t i = 0; i < state_a.size(); ++i) {
      CHECK(tensor::to_host<double>(state_a[i].value) == tensor::to_host<double>(state_b[i].value));
    }
    // A skipped step: the roll-back alone.
    a.step(1.0);
    a.roll_back();
    CHECK(a.steps() == 3);
    CHECK(tensor::to_host<double>(rolled.value) == tensor::to_host<double>(direct.value));
  }
  OptimizerSpec spec;
  const auto p = parameter("layer0.weight", {1}, {1});
  Optimizer<double> without(spec, {p}, exec);
  without.step();
  CHECK_THROWS_WITH(without.roll_back(), Catch::Contains("keep_previous"));
}

TEST_CASE("optimizer state is named per parameter as in PyTorch", "[model][optimizer]") {
  tensor::ExecContext exec;
  const std::vector<Parameter<double>> params{parameter("layer2.weight", {1, 2}, {0.5, -0.5})};
  OptimizerSpec spec;
  spec.kind = OptimizerKind::sgd;
  spec.lr = 0.1;
  spec.momentum = 0.5;
  Optimizer<double> sgd(spec, params, exec);
  sgd.step();
  sgd.step();
  CHECK(sgd.steps() == 2);
  const auto state = sgd.state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == "layer2.weight.momentum_buffer");
  // v1 = g, v2 = 0.5 g + g; w = w0 - 0.1 (v1 + v2)
  CHECK(tensor::to_host<double>(state[0].value) == std::vector<double>{0.75, -0.75});
  CHECK(tensor::to_host<double>(params[0].value)[0] == Approx(1 - 0.1 * (0.5 + 0.75)).epsilon(1e-15));

  spec.kind = OptimizerKind::adamw;
  const Optimizer<double> adamw(spec, params, exec);
  std::vector<std::string> names;
  for (const auto& s : adamw.state()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"layer2.weight.exp_avg", "layer2.weight.exp_avg_sq"});
}

TEST_CASE("the learning rate warms up linearly, then stays or follows a cosine", "[model][optimizer]") {
  OptimizerSpec spec;
  spec.lr = 0.01;
  spec.warmup_steps = 4;
  spec.total_steps = 24;
  for (int t = 0; t < 4; ++t) CHECK(learning_rate(spec, t) == Approx(0.01 * (t + 1) / 4).epsilon(1e-15));
  spec.lr_schedule = config::LrSchedule::constant;
  CHECK(learning_rate(spec, 4) == 0.01);
  CHECK(learning_rate(spec, 1000) == 0.01);
  spec.lr_schedule = config::LrSchedule::cosine;
  CHECK(learning_rate(spec, 4) == Approx(0.01).epsilon(1e-15));
  CHECK(learning_rate(spec, 14) == Approx(0.005).epsilon(1e-12));  // half way: cos(pi/2) = 0
  CHECK(learning_rate(spec, 9) == Approx(0.005 * (1 + std::cos(M_PI / 4))).epsilon(1e-12));
  CHECK(learning_rate(spec, 24) == Approx(0.0).margin(1e-18));
  CHECK(learning_rate(spec, 30) == Approx(0.0).margin(1e-18));  // stays at 0 past train.steps
  spec.warmup_steps = 0;
  CHECK(learning_rate(spec, 0) == 0.01);
}

TEST_CASE("weight decay reaches only the parameters that decay", "[model][optimizer]") {
  tensor::ExecContext exec;
  auto weight = parameter("layer0.weight", {1, -2}, {0, 0});
  weight.decays = true;
  const auto bias = parameter("layer0.bias", {1, -2}, {0, 0});
  for (const auto kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    tensor::from_host<double>({1, -2}, weight.value);
    tensor::from_host<double>({1, -2}, bias.value);
    OptimizerSpec spec;
    spec.kind = kind;
    spec.lr = 0.1;
    spec.momentum = 0;
    spec.weight_decay = 0.5;
    Optimizer<double> optimizer(spec, {weight, bias}, exec);
    optimizer.step();
    // A zero gradient: only decay moves a weight, by lr * wd * w in both optimizers.
    const auto decayed = tensor::to_host<double>(weight.value);
    CHECK(decayed[0] == Approx(0.95).epsilon(1e-12));
    CHECK(decayed[1] == Approx(-1.9).epsilon(1e-12));
    CHECK(tensor::to_host<double>(bias.value) == std::vector<double>{1, -2});
  }
}

namespace {

// rows x columns of random values and gradients.
Parameter<float> random_parameter(const std::string& name, int rows, int columns, std::uint64_t seed) {
  Parameter<float> p{name, tensor::uninitialized_matrix<float>("test::value", rows, columns),
                     tensor::uninitialized_matrix<float>("test::grad", rows, columns)};
  std::vector<float> value(static_cast<std::size_t>(rows) * columns), grad(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    value[i] = static_cast<float>(std::sin(1.3 * static_cast<double>(i + seed)));
    grad[i] = static_cast<float>(std::cos(0.7 * static_cast<double>(i * seed + 1)));
  }
  tensor::from_host<float>(value, p.value);
  tensor::from_host<float>(grad, p.grad);
  return p;
}

// Copies of `parameters` with their own values and the same gradients.
std::vector<Parameter<float>> copies(const std::vector<Parameter<float>>& parameters) {
  std::vector<Parameter<float>> out;
  for (const auto& p : parameters) {
    Parameter<float> copy = p;
    copy.value = tensor::clone<float>("test::copy", p.value);
    out.push_back(copy);
  }
  return out;
}

}  // namespace

// train.distributed_optimizer: replica r of d updates its rows of each
// parameter with the state of those rows alone; put together, the replicas'
// rows are bitwise what one optimizer over all of them makes, and hold each
// row once, the replicas' elements within a row of an equal share.
TEST_CASE("optimizer shards, put together, are bitwise the whole optimizer", "[model][optimizer]") {
  tensor::ExecContext exec;
  const std::vector<Parameter<float>> parameters{
      random_parameter("layer0.weight", 7, 5, 1), random_parameter("layer0.bias", 1, 5, 2),
      random_parameter("layer1.weight", 3, 11, 3), random_parameter("layer1.bias", 1, 11, 4)};
  for (const auto kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    for (const int count : {2, 3, 5}) {
      INFO(config::name_of(kind) << " over " << count << " replicas");
      OptimizerSpec spec;
      spec.kind = kind;
      spec.lr = 0.05;
      spec.weight_decay = 0.1;
      const auto whole_parameters = copies(parameters);
      Optimizer<float> whole(spec, whole_parameters, exec);
      std::vector<std::vector<Parameter<float>>> replicas;
      std::vector<std::unique_ptr<Optimizer<float>>> shards;
      for (int r = 0; r < count; ++r) {
        replicas.push_back(copies(parameters));
        shards.push_back(std::make_unique<Optimizer<float>>(spec, replicas.back(), exec, OptimizerShard{r, count}));
      }
      for (int step = 0; step < 3; ++step) {
        whole.step(0.5);
        for (auto& shard : shards) shard->step(0.5);
      }
      const auto rows = shard_rows(parameters, count);
      std::vector<std::int64_t> elements(static_cast<std::size_t>(count), 0);
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        INFO(parameters[i].name);
        const auto expected = tensor::to_host<float>(whole_parameters[i].value);
        std::vector<float> assembled;
        int next_row = 0;
        for (int r = 0; r < count; ++r) {
          const RowRange range = rows[static_cast<std::size_t>(r)][i];
          CHECK(range.begin == next_row);  // each row once, in order
          next_row = range.end;
          const auto mine = tensor::to_host<float>(range.of(replicas[static_cast<std::size_t>(r)][i].value));
          assembled.insert(assembled.end(), mine.begin(), mine.end());
          elements[static_cast<std::size_t>(r)] += static_cast<std::int64_t>(mine.size());
        }
        CHECK(next_row == parameters[i].value.extent_int(0));
        CHECK(assembled == expected);
      }
      const std::int64_t total = 7 * 5 + 5 + 3 * 11 + 11;
      for (const std::int64_t mine : elements) CHECK(std::abs(mine * count - total) <= 11 * count);
      // The state follows the rows: each replica's, put together, is the whole optimizer's.
      const auto whole_state = whole.state();
      for (std::size_t s = 0; s < whole_state.size(); ++s) {
        std::vector<float> assembled;
        for (const auto& shard : shards) {
          const auto state = shard->state().at(s);
          CHECK(state.rows.end - state.rows.begin == state.value.extent_int(0));
          const auto mine = tensor::to_host<float>(state.value);
          assembled.insert(assembled.end(), mine.begin(), mine.end());
        }
        CHECK(assembled == tensor::to_host<float>(whole_state[s].value));
      }
    }
  }
}
