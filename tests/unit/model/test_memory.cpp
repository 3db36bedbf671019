// The footprint a stage is estimated to need, from its layer specs alone,
// against what a built stage really holds: its parameters' elements and the
// bytes it stashes for each microbatch in flight.
#include <string>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/stage.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;
using test::random_matrix;

namespace {

ModelSpec model_of(const std::string& kind) {
  ModelSpec spec = test::residual_model(11);
  if (kind == "mlp") {
    spec.kind = kind;
    spec.hidden = {12, 7, 9};
  }
  return spec;
}

}  // namespace

TEST_CASE("a stage's estimated footprint is what the built stage holds", "[model][memory]") {
  const std::string kind = GENERATE("mlp", "residual_mlp");
  const bool recompute = GENERATE(false, true);
  const ModelSpec model = model_of(kind);
  const int layers = model.layer_count();
  constexpr int rows = 4;
  for (const LayerRange range : {LayerRange{0, layers}, LayerRange{0, 2}, LayerRange{1, layers - 1}}) {
    INFO("layers [" << range.first << ", " << range.end() << ") recompute " << recompute);
    tensor::ExecContext exec;
    Stage<double> stage(model, range, {{kernels::GemmPath::vendor}, recompute}, exec);
    const StageFootprint footprint = stage_footprint(model, range, {rows}, recompute);
    CHECK(footprint.parameters == test::parameter_elements(stage));
    CHECK(footprint.input_per_microbatch == rows * stage.input_dim());
    CHECK(footprint.output_per_microbatch == rows * stage.output_dim());

    const auto X = random_matrix<double>(rows, stage.input_dim(), 5);
    const auto Y = tensor::uninitialized_matrix<double>("Y", rows, stage.output_dim());
    stage.forward(0, X, Y);
    stage.forward(1, X, Y);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == 2 * footprint.stash_per_microbatch * 8);
    const auto dX = tensor::uninitialized_matrix<double>("dX", rows, stage.input_dim());
    stage.backward_input(0, random_matrix<double>(rows, stage.output_dim(), 6), dX);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) ==
          (footprint.kept_for_weight_gradient + footprint.stash_per_microbatch) * 8);
  }
}

// compute.precision = bf16 and fp16: layers keep what they save in 2 bytes
// (their statistics and the first stage's data excepted); the bytes a built
// float stage stashes are what activation_bytes predicts, exactly: half of
// float32's for the MLP, whose layers keep no statistics (the residual MLP's
// LayerNorms keep 1/std in float32).
TEST_CASE("a reduced-precision stage stashes the bytes its footprint predicts", "[model][memory][bf16][fp16]") {
  const std::string kind = GENERATE("mlp", "residual_mlp");
  const auto precision = GENERATE(kernels::Precision::fp32, kernels::Precision::bf16, kernels::Precision::fp16);
  const bool recompute = GENERATE(false, true);
  const ModelSpec model = model_of(kind);
  constexpr int rows = 4;
  for (const LayerRange range : {LayerRange{0, model.layer_count()}, LayerRange{1, model.layer_count() - 1}}) {
    INFO(kernels::name_of(precision) << " recompute " << recompute << " layers [" << range.first << ", " << range.end()
                                     << ")");
    tensor::ExecContext exec;
    StageOptions options{{kernels::GemmPath::vendor}, recompute};
    options.kernels.precision = precision;
    Stage<float> stage(model, range, options, exec);
    const StageFootprint footprint = stage_footprint(model, range, {rows}, recompute);
    const bool reduced = precision != kernels::Precision::fp32;
    const ActivationBytes bytes = activation_bytes(footprint, 4, reduced ? 2 : 4);
    const auto X = random_matrix<float>(rows, stage.input_dim(), 5);
    const auto Y = tensor::uninitialized_matrix<float>("Y", rows, stage.output_dim());
    stage.forward(0, X, Y);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == bytes.stash);
    const auto dX = tensor::uninitialized_matrix<float>("dX", rows, stage.input_dim());
    stage.backward_input(0, random_matrix<float>(rows, stage.output_dim(), 6), dX);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == bytes.kept);
    if (reduced) {
      const ActivationBytes wide = activation_bytes(footprint, 4, 4);
      CHECK(2 * bytes.kept == wide.kept);
      // A recomputing first stage keeps its input, the data, in float32.
      if (kind == "mlp" && (!recompute || range.first > 0)) CHECK(2 * bytes.stash == wide.stash);
    }
  }
}
