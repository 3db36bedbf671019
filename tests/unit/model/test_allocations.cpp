// No hot-path allocation after the first step (DESIGN.md §3): a stage and the
// sequential trainer take their temporaries and stash copies from the
// context's pool, so steps 2 and 3 allocate nothing in Kokkos; and what every
// microbatch passes around (tensors, pool labels, contexts) costs no heap
// allocation either, counted by this executable's operator new.
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "test_models.hpp"

// AddressSanitizer brings its own operator new, whose blocks a replacement's
// delete would hand to free(): under it the heap is not counted.
#if defined(__SANITIZE_ADDRESS__)
#define KPIPE_TEST_COUNTS_HEAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KPIPE_TEST_COUNTS_HEAP 0
#endif
#endif
#ifndef KPIPE_TEST_COUNTS_HEAP
#define KPIPE_TEST_COUNTS_HEAP 1
#endif

#if KPIPE_TEST_COUNTS_HEAP
namespace {
thread_local long heap_allocations = 0;
}  // namespace

// Every heap allocation of the executable, counted per thread.
void* operator new(std::size_t bytes) {
  ++heap_allocations;
  if (void* block = std::malloc(bytes == 0 ? 1 : bytes)) return block;
  throw std::bad_alloc();
}
void operator delete(void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t) noexcept { std::free(block); }
#endif

using namespace kpipe;
using namespace kpipe::model;
using test::residual_model;

namespace {

#if KPIPE_TEST_COUNTS_HEAP
// Heap allocations (operator new) on this thread while `f` runs.
template <class F>
long heap_allocations_in(const F& f) {
  const long before = heap_allocations;
  f();
  return heap_allocations - before;
}
#endif

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
  const std::string kind = GENERATE("mlp", "residual_mlp");
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

#if KPIPE_TEST_COUNTS_HEAP
TEST_CASE("copying a tensor, taking a pooled buffer by a literal label and reusing a context allocate nothing",
          "[model][allocations]") {
  tensor::ExecContext exec;
  const tensor::Tensor tensor(exec.pool().take<float>("kpipe::model::a_label_past_fifteen_characters", 4, 8));
  // A spec holds its extents itself: copies and reshapes make no vector.
  std::int64_t rows = 0;
  CHECK(heap_allocations_in([&] {
          const tensor::Tensor copy = tensor;
          rows = copy.reshaped(tensor::TensorSpec::matrix<float>(32, 1)).spec().extent(0);
        }) == 0);
  CHECK(rows == 32);
  // A label is looked up as given, not as a std::string made for the call.
  exec.pool().take<float>("kpipe::model::another_long_label", 4, 8);
  std::size_t cols = 0;
  CHECK(heap_allocations_in(
            [&] { cols = exec.pool().take<float>("kpipe::model::another_long_label", 4, 8).extent(1); }) == 0);
  CHECK(cols == 8);
  // A context cleared after W keeps its children and their storage for the
  // next microbatch's forward.
  Context context;
  const auto one_microbatch = [&] {
    context.reset_children(3);
    for (auto& child : context.children) child.save("x", tensor);
    context.children[1].save("dy", tensor);
    context.clear();
  };
  one_microbatch();
  CHECK(heap_allocations_in(one_microbatch) == 0);
  CHECK(context.children.size() == 3);
  CHECK(context.bytes() == 0);
}
#endif
