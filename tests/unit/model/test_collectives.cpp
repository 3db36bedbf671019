// The serial collectives of the sequential reference, and a stage built with
// injected collectives computing what a stage with its own computes.
#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/loss.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/model/training/loss.hpp"

using namespace kpipe;
using namespace kpipe::model;

TEST_CASE("serial collectives: one rank, the sum is the buffer, the gather and the reduce-scatter a copy",
          "[model][collectives]") {
  tensor::ExecContext exec;
  SerialCollectives serial(exec);
  CHECK(serial.size(Group::tensor) == 1);
  CHECK(serial.rank(Group::data) == 0);
  const auto local = test::random_matrix<double>(3, 4, 1);
  const auto before = tensor::to_host<double>(local);
  serial.all_reduce_sum(Group::tensor, local);
  CHECK(tensor::to_host<double>(local) == before);
  const auto gathered = tensor::zero_matrix<double>("test::gathered", 3, 4);
  serial.all_gather(Group::tensor, local, gathered);
  CHECK(tensor::to_host<double>(gathered) == before);
  const auto wrong = tensor::zero_matrix<double>("test::wrong", 6, 4);
  CHECK_THROWS_WITH(serial.all_gather(Group::tensor, local, wrong),
                    "all_gather of 3x4 float64 into 6x4 float64: with one rank both must be the same shape");
  const auto kept = tensor::zero_matrix<double>("test::kept", 3, 4);
  serial.reduce_scatter_sum(Group::tensor, local, kept);
  CHECK(tensor::to_host<double>(kept) == before);
  CHECK_THROWS_WITH(serial.reduce_scatter_sum(Group::tensor, wrong, local),
                    "reduce_scatter_sum of 6x4 float64 into 3x4 float64: with one rank both must be the same shape");
}

TEST_CASE("a stage with injected collectives computes bitwise what a stage with its own does", "[model][collectives]") {
  ModelSpec spec;
  spec.kind = "residual_mlp";
  spec.input_dim = 6;
  spec.hidden = {8, 8};
  spec.output_dim = 5;
  tensor::ExecContext exec;
  SerialCollectives injected(exec);
  Stage<double> own(spec, {0, 4}, {}, exec);
  Stage<double> given(spec, {0, 4}, {}, injected, exec);
  const auto X = test::random_matrix<double>(4, 6, 3);
  auto Y1 = tensor::uninitialized_matrix<double>("test::y1", 4, 5);
  auto Y2 = tensor::uninitialized_matrix<double>("test::y2", 4, 5);
  own.forward_no_grad(X, Y1);
  given.forward_no_grad(X, Y2);
  CHECK(tensor::to_host<double>(Y1) == tensor::to_host<double>(Y2));
}

TEMPLATE_TEST_CASE("on one rank the vocabulary-parallel cross-entropy is bitwise the plain one", "[model][collectives]",
                   float, double) {
  using Scalar = TestType;
  tensor::ExecContext exec;
  SerialCollectives serial(exec);
  const auto logits = test::random_matrix<Scalar>(6, 9, 4);
  tensor::Labels labels("test::labels", 6);
  Kokkos::deep_copy(labels, 4);
  const auto expected = tensor::zero_matrix<Scalar>("test::expected", 6, 9);
  const auto actual = tensor::zero_matrix<Scalar>("test::actual", 6, 9);
  const double plain = kernels::softmax_cross_entropy<Scalar>(exec.space(), logits, labels, Scalar(0.5), expected);
  CHECK(vocab_parallel_cross_entropy<Scalar>(exec, serial, logits, labels, 0, 9, Scalar(0.5), actual) == plain);
  CHECK(tensor::to_host<Scalar>(actual) == tensor::to_host<Scalar>(expected));
}
