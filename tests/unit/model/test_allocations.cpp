// No hot-path allocation after the first step (DESIGN.md §3): a stage and the
// sequential trainer take their temporaries and stash copies from the
// context's pool, so steps 2 and 3 allocate nothing in Kokkos.
#include <sstream>
#include <string>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/trainer.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;
using test::residual_model;

namespace {

// "label x count" for every allocation counted, to name an unexpected one.
std::string allocations_of(const tensor::AllocationCounter& counter) {
  std::ostringstream out;
  for (const auto& [label, tally] : counter.by_label()) out << label << " x" << tally.count << "; ";
  return out.str();
}

}  // namespace

TEST_CASE("a stage allocates nothing after its first step", "[model][allocations]") {
  const bool recompute = GENERATE(false, true);
  const bool split = GENERATE(false, true);
  tensor::ExecContext exec;
  Stage<float> stage(residual_model(), {0, 5}, {{kernels::GemmPath::vendor}, recompute}, exec);
  constexpr int rows = 4, microbatches = 3;
  const auto X = test::random_matrix<float>(rows, stage.input_dim(), 1);
  const auto dY = test::random_matrix<float>(rows, stage.output_dim(), 2);
  auto Y = tensor::uninitialized_matrix<float>("test::y", rows, stage.output_dim());
  auto dX = tensor::uninitialized_matrix<float>("test::dx", rows, stage.input_dim());
  tensor::AllocationCounter counter;
  for (int step = 0; step < 3; ++step) {
    counter.start();
    stage.zero_grad();
    for (int mb = 0; mb < microbatches; ++mb) stage.forward(mb, X, Y);
    for (int mb = 0; mb < microbatches; ++mb) {
      if (split) {
        stage.backward_input(mb, dY, dX);
      } else {
        stage.backward(mb, dY, dX);
      }
    }
    if (split) {
      for (int mb = 0; mb < microbatches; ++mb) stage.backward_weight(mb);
    }
    stage.forward_no_grad(X, Y);
    counter.stop();
    INFO("step " << step << " recompute " << recompute << " split " << split << ": " << allocations_of(counter));
    if (step == 0) {
      CHECK(counter.total().count > 0);
    } else {
      REQUIRE(counter.total().count == 0);
    }
  }
}

TEST_CASE("the sequential trainer allocates nothing after its first step", "[model][allocations]") {
  const auto kind = GENERATE(ModelKind::mlp, ModelKind::residual_mlp);
  const auto loss = GENERATE(LossKind::cross_entropy, LossKind::mse);
  TrainerSpec spec;
  spec.model.kind = kind;
  spec.model.input_dim = 12;
  spec.model.hidden = {16, 16, 16};
  spec.model.output_dim = 4;
  spec.model.loss = loss;
  spec.data = {loss == LossKind::mse ? Task::regression : Task::classification, 5, 12, 4};
  spec.optimizer.grad_clip = 0.5;
  spec.global_batch = 16;
  spec.microbatch_size = 4;
  spec.data_parallel = 2;
  // Two stages ({first, count}): the mlp has 4 layers, the residual_mlp 5.
  spec.stages = {{0, 2}, {2, spec.model.layer_count() - 2}};
  spec.stage.recompute = GENERATE(false, true);
  tensor::ExecContext exec;
  SequentialTrainer<float> trainer(spec, exec);
  tensor::AllocationCounter counter;
  for (int step = 0; step < 3; ++step) {
    counter.start();
    trainer.step();
    counter.stop();
    INFO("step " << step << ": " << allocations_of(counter));
    if (step == 0) {
      CHECK(counter.total().count > 0);
    } else {
      REQUIRE(counter.total().count == 0);
    }
  }
}
