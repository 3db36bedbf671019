// Incremental inference through a stage's KV cache: prompts of two sequences
// fed through Stage::infer in chunks, interleaved in shared microbatches, one
// stage or two, give the logits forward_no_grad computes on the whole window;
// chunked and one-shot prefill agree; and the misuses are clear errors.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/stage.hpp"
#include "relative_error.hpp"
#include "test_models.hpp"
#include "vendor_gemm.hpp"

using namespace kpipe;
using namespace kpipe::model;

using kpipe::test::relative_error;

namespace {

constexpr int block_tokens = 4;
const std::vector<int> sequence_ids = {3, 8};  // any ids, not rows

// 4 layers: embedding, two blocks, head.
ModelSpec serving_transformer() { return test::small_transformer(11, 12, config::InitKind::gpt2, 23); }
// Its rotary, grouped-query twin: each token rotated by its cached position.
ModelSpec serving_llama() { return test::small_llama(11, 12, 23); }

// A prompt of T token ids per sequence, row s for sequence_ids[s].
std::vector<std::vector<int>> prompts(const ModelSpec& spec) {
  std::vector<std::vector<int>> out;
  for (std::size_t s = 0; s < sequence_ids.size(); ++s) {
    std::vector<int> ids;
    for (int t = 0; t < spec.context; ++t) {
      ids.push_back(static_cast<int>(kernels::random_bits(60 + s, static_cast<std::uint64_t>(t)) %
                                     static_cast<std::uint64_t>(spec.vocab)));
    }
    out.push_back(ids);
  }
  return out;
}

template <class Scalar>
tensor::Matrix<Scalar> device_rows(const std::vector<Scalar>& values, int rows, int cols) {
  auto out = tensor::uninitialized_matrix<Scalar>("test::rows", rows, cols);
  tensor::from_host<Scalar>(values, out);
  return out;
}

// forward_no_grad's logits of the whole prompts: sequences x (T·vocab).
template <class Scalar>
std::vector<Scalar> whole_window(const Stage<Scalar>& model, const std::vector<std::vector<int>>& prompt) {
  std::vector<Scalar> ids;
  for (const auto& row : prompt) ids.insert(ids.end(), row.begin(), row.end());
  const int rows = static_cast<int>(prompt.size());
  const auto Y = tensor::uninitialized_matrix<Scalar>("test::logits", rows, model.output_dim());
  model.forward_no_grad(device_rows(ids, rows, model.input_dim()), Y);
  return tensor::to_host<Scalar>(Y);
}

// The same logits through `stages`' infer: microbatch m carries the next
// chunks[min(m, last)] tokens of each sequence, a table all stages share
// reserves their slots as a serving scheduler would, and a sequence that
// comes and goes makes the blocks non-contiguous.
template <class Scalar>
std::vector<Scalar> served(const std::vector<Stage<Scalar>*>& stages, const std::vector<std::vector<int>>& prompt,
                           const std::vector<int>& chunks) {
  const int T = static_cast<int>(prompt.front().size());
  const int vocab = stages.back()->token_output_width();
  KvBlockTable table(16, block_tokens);
  for (Stage<Scalar>* stage : stages) stage->enable_kv_cache(table.blocks(), table.block_tokens());
  table.extend(99, 3);
  std::vector<Scalar> logits(prompt.size() * static_cast<std::size_t>(T * vocab));
  std::vector<int> done(prompt.size(), 0);
  for (std::size_t m = 0; *std::min_element(done.begin(), done.end()) < T; ++m) {
    if (m == 1) table.release(99);
    const int chunk = chunks[std::min(m, chunks.size() - 1)];
    TokenBatch batch;
    std::vector<Scalar> ids;
    for (std::size_t s = 0; s < prompt.size(); ++s) {
      const int end = std::min(T, done[s] + chunk);
      table.extend(sequence_ids[s], end);
      for (int t = done[s]; t < end; ++t) {
        batch.sequence.push_back(sequence_ids[s]);
        batch.position.push_back(t);
        ids.push_back(static_cast<Scalar>(prompt[s][static_cast<std::size_t>(t)]));
      }
      done[s] = end;
    }
    tensor::Matrix<Scalar> X = device_rows(ids, batch.size(), 1);
    for (Stage<Scalar>* stage : stages) {
      const auto Y = tensor::uninitialized_matrix<Scalar>("test::y", batch.size(), stage->token_output_width());
      stage->infer(table, batch, X, Y);
      X = Y;
    }
    const auto rows = tensor::to_host<Scalar>(X);
    for (int i = 0; i < batch.size(); ++i) {
      const auto s = static_cast<std::size_t>(std::find(sequence_ids.begin(), sequence_ids.end(), batch.sequence[i]) -
                                              sequence_ids.begin());
      std::copy(rows.begin() + i * vocab, rows.begin() + (i + 1) * vocab,
                logits.begin() + static_cast<std::ptrdiff_t>((s * T + batch.position[i]) * vocab));
    }
  }
  return logits;
}

}  // namespace

TEMPLATE_TEST_CASE("a prompt served through the KV cache in chunks gives the whole window's logits",
                   "[model][kv_cache][transformer]", float, double) {
  using Scalar = TestType;
  const double tolerance = std::is_same_v<Scalar, float> ? 1e-5 : 1e-10;
  tensor::ExecContext exec;
  const bool llama = GENERATE(false, true);
  const auto spec = llama ? serving_llama() : serving_transformer();
  const int layers = spec.layer_count();
  const auto prompt = prompts(spec);
  const Stage<Scalar> reference(spec, {0, layers}, {}, exec);
  const auto expected = whole_window(reference, prompt);
  const auto chunks = GENERATE(std::vector<int>{5, 1}, std::vector<int>{1}, std::vector<int>{3, 4, 100});
  const bool split = GENERATE(false, true);
  INFO(spec.kind << ", first chunk " << chunks.front() << ", two stages " << split);
  std::vector<std::unique_ptr<Stage<Scalar>>> stages;
  for (const LayerRange range :
       split ? std::vector<LayerRange>{{0, 2}, {2, layers - 2}} : std::vector<LayerRange>{{0, layers}}) {
    stages.push_back(std::make_unique<Stage<Scalar>>(spec, range, StageOptions{}, exec));
  }
  std::vector<Stage<Scalar>*> pipeline;
  for (const auto& stage : stages) pipeline.push_back(stage.get());
  CHECK(relative_error(served(pipeline, prompt, chunks), expected) < tolerance);
}

TEST_CASE("chunked and one-shot prefill through the KV cache agree in float", "[model][kv_cache][transformer]") {
  tensor::ExecContext exec;
  const auto spec = serving_transformer();
  const auto prompt = prompts(spec);
  Stage<float> stage(spec, {0, spec.layer_count()}, {}, exec);
  const auto one_shot = served<float>({&stage}, prompt, {spec.context});
  CHECK(relative_error(served<float>({&stage}, prompt, {5, 1}), one_shot) < 1e-5);
}

// compute.precision = bf16: the cache holds K and V in bfloat16, so the same
// blocks take half the bytes, and serving differs from the whole window's
// bf16 forward only by that rounding of K and V (bf16's unit roundoff is
// 2^-8 = 0.0039).
TEST_CASE("a bf16 stage caches K and V in bfloat16: half the bytes, the whole window's logits",
          "[model][kv_cache][transformer][precision]") {
  tensor::ExecContext exec;
  const auto spec = serving_transformer();
  const auto prompt = prompts(spec);
  StageOptions bf16;
  bf16.kernels.precision = kernels::Precision::bf16;
  Stage<float> reduced(spec, {0, spec.layer_count()}, bf16, exec);
  Stage<float> full(spec, {0, spec.layer_count()}, {}, exec);
  reduced.enable_kv_cache(10, block_tokens);
  full.enable_kv_cache(10, block_tokens);
  CHECK(2 * reduced.kv_cache_bytes() == full.kv_cache_bytes());
  const auto error = relative_error(served<float>({&reduced}, prompt, {5, 1}), whole_window(reduced, prompt));
  INFO("relative error " << error);
  CHECK(error < 0.01);
}

TEST_CASE("a transformer stage reports its per-token widths and KV cache size", "[model][kv_cache]") {
  tensor::ExecContext exec;
  const auto spec = serving_transformer();
  const Stage<double> first(spec, {0, 2}, {}, exec);
  Stage<double> last(spec, {2, 2}, {}, exec);
  CHECK(first.token_input_width() == 1);
  CHECK(first.token_output_width() == spec.dim);
  CHECK(first.attention_layers() == 1);
  CHECK(last.token_input_width() == spec.dim);
  CHECK(last.token_output_width() == spec.vocab);
  CHECK(last.attention_layers() == 1);
  CHECK(last.kv_cache_bytes() == 0);
  last.enable_kv_cache(10, block_tokens);
  CHECK(last.kv_cache_bytes() == 2 * 1 * 10 * block_tokens * spec.dim * sizeof(double));
  CHECK(kv_block_bytes(3, 64, 16, tensor::DType::float32) == 2 * 3 * 16 * 64 * sizeof(float));
  CHECK(kv_block_bytes(3, 64, 16, tensor::DType::bfloat16) == 2 * 3 * 16 * 64 * 2);
}

TEST_CASE("a grouped-query llama caches its key/value heads once: heads / kv_heads fewer bytes", "[model][kv_cache]") {
  tensor::ExecContext exec;
  auto spec = test::small_llama(11, 12, 23);  // 2 query heads of 4 features
  Stage<double> grouped(spec, {0, spec.layer_count()}, {}, exec);
  spec.values["model.kv_heads"] = std::int64_t{2};
  Stage<double> multi_head(spec, {0, spec.layer_count()}, {}, exec);
  grouped.enable_kv_cache(10, block_tokens);
  multi_head.enable_kv_cache(10, block_tokens);
  CHECK(grouped.kv_cache_bytes() == 2 * 2 * 10 * block_tokens * 4 * sizeof(double));  // K and V, 2 layers, 1 head
  CHECK(multi_head.kv_cache_bytes() == 2 * grouped.kv_cache_bytes());
  CHECK(kv_width(spec) == 8);
}

TEST_CASE("incremental inference is refused where it cannot work", "[model][kv_cache]") {
  tensor::ExecContext exec;
  const auto spec = serving_transformer();
  Stage<double> stage(spec, {0, spec.layer_count()}, {}, exec);
  KvBlockTable table(4, block_tokens);
  table.extend(1, 2);
  const TokenBatch batch{{1, 1}, {0, 1}};
  const auto X = device_rows<double>({2, 5}, 2, 1);
  const auto Y = tensor::uninitialized_matrix<double>("test::y", 2, spec.vocab);
  CHECK_THROWS_WITH(stage.infer(table, batch, X, Y), Catch::Contains("enable_kv_cache"));
  stage.enable_kv_cache(table.blocks(), table.block_tokens());
  CHECK_NOTHROW(stage.infer(table, batch, X, Y));
  // A position the table has not reserved, past the context, out of order.
  CHECK_THROWS_AS(stage.infer(table, TokenBatch{{1, 1}, {1, 2}}, X, Y), kpipe::Error);
  table.extend(1, spec.context + 1);
  CHECK_THROWS_AS(stage.infer(table, TokenBatch{{1, 1}, {0, spec.context}}, X, Y), kpipe::Error);
  CHECK_THROWS_AS(stage.infer(table, TokenBatch{{1, 1}, {1, 0}}, X, Y), kpipe::Error);
  // Wrong widths, and a model without attention.
  CHECK_THROWS_AS(stage.infer(table, batch, Y, Y), kpipe::Error);
  Stage<double> mlp(test::residual_model(), {0, 2}, {}, exec);
  CHECK_THROWS_AS(mlp.enable_kv_cache(4, block_tokens), kpipe::Error);
}

TEST_CASE("an unchunked prefill gives bitwise the same logits alone or batched with another",
          "[model][kv_cache][transformer]") {
  // Every kernel of the token path is row-wise (GEMM rows, LayerNorm, GELU)
  // or per token (cached attention), so what else a microbatch holds never
  // changes a sequence's logits: serving is bitwise its own reference. Except
  // on cuBLAS, which picks its kernel by the row count: there a sequence's
  // logits alone and beside another differ in their last bits (H200).
  tensor::ExecContext exec;
  const auto spec = serving_transformer();
  const auto prompt = prompts(spec);
  Stage<float> stage(spec, {0, spec.layer_count()}, {}, exec);
  const auto batched = served<float>({&stage}, prompt, {spec.context});
  const auto alone = served<float>({&stage}, {prompt.front()}, {spec.context});
  REQUIRE(alone.size() * 2 == batched.size());
  if (test::vendor_gemm_is_cublas()) {
    CHECK(relative_error(alone, std::vector<float>(batched.begin(), batched.begin() + alone.size())) < 1e-5);
  } else {
    CHECK(std::equal(alone.begin(), alone.end(), batched.begin()));
  }
}
