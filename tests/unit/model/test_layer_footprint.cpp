// Every layer kind's stated footprint (layer_kind.hpp) against what its
// layers really hold on one rank of a tensor group of t = 1, 2 and 4, with
// and without sequence parallelism and selective recomputation: parameter
// elements, the bytes a microbatch stashes in F, and what it keeps from B to
// W. The group is a stand-in whose collectives move no data: shapes, not
// values, are checked, so one process builds any rank of any t.
#include <fmt/format.h>

#include <string>

#include "catch.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/stage.hpp"
#include "random_matrix.hpp"
#include "test_models.hpp"

using namespace kpipe;
using namespace kpipe::model;

namespace {

// Rank 0 of a group of `ranks`: sums leave buffers as they are, gathers and
// reduce-scatters write nothing. Every buffer still has the shape the real
// collective would give it.
class ShapeOnlyCollectives final : public Collectives {
 public:
  explicit ShapeOnlyCollectives(int ranks) : ranks_(ranks) {}

  int size(Group group) const override { return group == Group::tensor ? ranks_ : 1; }
  int rank(Group) const override { return 0; }
  void all_reduce_sum(Group, const tensor::Tensor&) override {}
  void all_gather(Group, const tensor::Tensor&, const tensor::Tensor&) override {}
  void reduce_scatter_sum(Group, const tensor::Tensor&, const tensor::Tensor&) override {}

 private:
  int ranks_;
};

ModelSpec model_of(const std::string& kind) {
  if (kind == "llama") {  // 8 query heads over 4 key/value groups: t = 1, 2, 4 hold whole groups
    ModelSpec spec = test::small_llama(16, 4, 5);
    spec.dim = 16;
    spec.heads = 8;
    spec.values["model.kv_heads"] = std::int64_t{4};
    spec.values["model.ffn_dim"] = std::int64_t{16};
    return spec;
  }
  if (kind == "transformer" || kind == "gpt2") {
    ModelSpec spec = test::small_transformer(16, 4, config::InitKind::he, 5);
    spec.heads = 4;
    if (kind == "gpt2") {  // GPT-2's LM head has no bias
      spec.head_bias = false;
      spec.activation = config::ActivationKind::gelu_tanh;
    }
    return spec;
  }
  ModelSpec spec = test::residual_model(7);
  spec.input_dim = 8;
  spec.output_dim = 4;
  if (kind == "mlp") {
    spec.kind = "mlp";
    spec.hidden = {16, 24, 8, 12};
  } else {
    spec.hidden = {16, 16, 16};
  }
  return spec;
}

// rows x input width of a stage's first input: token ids in [0, vocab) for a transformer's first stage.
tensor::Matrix<double> input_of(const ModelSpec& model, const Stage<double>& stage, int rows) {
  const auto X = test::random_matrix<double>(rows, stage.input_dim(), 3);
  if (model.token_sequences() && stage.layers().first == 0) Kokkos::deep_copy(X, 1.0);
  return X;
}

}  // namespace

TEST_CASE("each layer kind's footprint is what its layers hold on a tensor-parallel rank",
          "[model][memory][footprint]") {
  const std::string kind = GENERATE("mlp", "residual_mlp", "transformer", "gpt2", "llama");
  const int t = GENERATE(1, 2, 4);
  const bool sequence_parallel = GENERATE(false, true);
  const auto attention = GENERATE(kernels::AttentionPath::gemm, kernels::AttentionPath::fused);
  const bool selective = GENERATE(false, true);
  const ModelSpec model = model_of(kind);
  if (!model.token_sequences() && attention == kernels::AttentionPath::fused) return;
  const int layers = model.layer_count();
  constexpr int rows = 8;  // samples; t divides them
  ShapeOnlyCollectives collectives(t);
  for (const LayerRange range :
       {LayerRange{0, layers}, LayerRange{0, 2}, LayerRange{1, layers - 2}, LayerRange{layers - 2, 2}}) {
    INFO(fmt::format("{} t = {} sequence parallel {} selective recompute {} layers [{}, {})", kind, t,
                     sequence_parallel, selective, range.first, range.end()));
    tensor::ExecContext exec;
    StageOptions options{{kernels::GemmPath::vendor, attention}};
    options.sequence_parallel = sequence_parallel;
    options.selective_recompute = selective;
    Stage<double> stage(model, range, options, collectives, exec);
    FootprintQuery query{rows, t, sequence_parallel, TensorSplit::none, false, attention};
    query.selective_recompute = selective;
    const StageFootprint footprint = stage_footprint(model, range, query, false);
    CHECK(footprint.parameters == test::parameter_elements(stage));

    const int in_rows = stage.input_rows(rows), out_rows = stage.output_rows(in_rows);
    CHECK(footprint.input_per_microbatch == std::int64_t{in_rows} * stage.input_dim());
    const auto Y = tensor::uninitialized_matrix<double>("Y", out_rows, stage.output_dim());
    stage.forward(0, input_of(model, stage, in_rows), Y);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == footprint.saved_per_microbatch * 8);
    const auto dX = range.first == 0 ? tensor::Matrix<double>()
                                     : tensor::uninitialized_matrix<double>("dX", in_rows, stage.input_dim());
    stage.backward_input(0, test::random_matrix<double>(out_rows, stage.output_dim(), 4), dX);
    CHECK(static_cast<std::int64_t>(stage.stashed_bytes()) == footprint.kept_for_weight_gradient * 8);
  }
}

TEST_CASE("a layer kind is registered once, complete, and found by name", "[model][layer_kind]") {
  CHECK(layer_kind("decoder_block").attention_layers == 1);
  CHECK(layer_kind("linear").pairs);
  CHECK_THROWS_WITH(layer_kind("linaer"), Catch::Contains("did you mean \"linear\"") && Catch::Contains("lm_head"));
  LayerKind copy = layer_kind("linear");
  CHECK_THROWS_WITH(register_layer_kind(copy), Catch::Contains("registered twice"));
  LayerKind incomplete;
  incomplete.name = "half_done";
  CHECK_THROWS_WITH(register_layer_kind(incomplete), Catch::Contains("needs a footprint"));
  LayerKind uncached = layer_kind("decoder_block");
  uncached.name = "uncached_block";
  uncached.kv_width = nullptr;
  CHECK_THROWS_WITH(register_layer_kind(uncached), Catch::Contains("holds attention layers but no kv_width"));
  CHECK_THROWS_WITH(layer_kind("half_done"), Catch::Contains("unknown layer kind"));
}
