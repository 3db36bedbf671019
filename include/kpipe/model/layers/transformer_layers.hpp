#pragma once
// The layers a decoder-only transformer adds to layer_kinds.hpp: the token
// and position embedding, causal multi-head self-attention between the QKV
// and output projections, and PerPosition, which lets the position-wise
// layers (Linear, LayerNorm, activations) run on a sequence batch. Samples
// are sequences: a stage boundary holds rows x (T·dim), which is the
// b x T x dim activation in row-major order.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/kernels/attention.hpp"
#include "kpipe/model/kernel_choice.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

// Y[s, t] = token[ids[s, t]] + position[t]: rows x T token ids (exact
// integers in Scalar, so the first stage's input travels like any other) to
// rows x (T·dim). Both tables start normal(0, 0.02), as in GPT-2, and decay.
// It is the first layer, so it computes no input gradient. Saves "ids" in F,
// "ids" and "dy" from B to W. In infer, n x 1 ids of single tokens give
// n x dim rows, each with the position its token has in the batch.
// Vocabulary-parallel in a tensor group of t ranks (Megatron-LM): rank r
// holds the token rows [r·vocab/t, (r+1)·vocab/t), looks up the ids in its
// range (zero elsewhere) and the group sums the lookups; the position table
// is whole on every rank and added by rank 0 only. With sequence parallelism
// the sum is reduce-scattered (each rank keeps its 1/t of the rows) and B
// gathers the output gradient's rows back for the tables.
template <class Scalar>
class TokenEmbedding final : public Layer<Scalar> {
 public:
  // The token table holds padded_vocab rows (ModelSpec::padded_vocab), those
  // at or past `vocab` zero: no id reaches them. `tied`: the table is the
  // owner of a tied LM head's weight (model.tie_embeddings).
  // `learned_positions` false (rotary models, whose attention rotates by
  // position): no position table.
  TokenEmbedding(int vocab, int padded_vocab, int context, int dim, const std::string& name, std::uint64_t init_key,
                 LayerEnvironment env, bool tied = false, bool learned_positions = true);

  const char* kind() const override { return "embedding"; }
  int input_dim() const override { return context(); }
  int output_dim() const override { return context() * dim(); }
  // Sequence parallelism: the sum is reduce-scattered, each rank keeps 1/t of the rows.
  int output_rows(int rows) const override { return rows / sequence_shards(); }
  int input_rows(int rows) const override { return rows * sequence_shards(); }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;
  int token_output_dim() const override { return dim(); }
  std::vector<Parameter<Scalar>> parameters() const override;

 private:
  int context() const { return context_; }
  int dim() const { return static_cast<int>(token_.value.extent(1)); }
  int sequence_shards() const { return env_.sequence_parallel ? env_.collectives.size(Group::tensor) : 1; }
  // Packed documents' separator, which restarts the learned positions; -1: none.
  int separator() const { return env_.documents ? env_.documents->separator() : -1; }

  LayerEnvironment env_;
  Parameter<Scalar> token_;     // padded vocab x dim, or this rank's padded vocab/t rows
  Parameter<Scalar> position_;  // T x dim, or empty without learned positions
  int context_;                 // T
  int first_;                   // the first token id of token_'s rows
  // What this rank adds: position_, or empty on tensor ranks other than 0
  // (the position counts once in the group's sum).
  tensor::Matrix<Scalar> added_position_;
};

// Causal multi-head self-attention on positions: (N = sequences·T) x 3·dim
// fused Q|K|V projections in, N x dim head outputs (concatenated) out; no
// parameters. compute.attention picks the kernels (kernels/attention.hpp):
// the GEMM path works on the projections in place and saves the QKV
// projection itself and the probabilities P (under selective recomputation
// only the projection: B rebuilds P from it); the fused path splits the heads
// into stacks and saves Q, K, V, O and the log-sum-exp L and recomputes P in
// backward; with compute.precision = bf16 or fp16 all in that type but L.
// Everything is freed by B: attention has no weight gradient. In infer, n x 3·dim rows of
// single tokens: their K and V go to the KV cache pools of global layer
// `layer` (its decoder block), and each token attends to its sequence's
// cached positions (kernels/attention_cached.hpp).
template <class Scalar>
class CausalSelfAttention final : public Layer<Scalar> {
 public:
  CausalSelfAttention(int heads, int context, int dim, int layer, KernelChoice kernels, LayerEnvironment env);

  const char* kind() const override { return "attention"; }
  int input_dim() const override { return 3 * dim_; }
  int output_dim() const override { return dim_; }
  std::vector<TensorDecl> saved(int rows) const override;
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;

 private:
  // The shape of one call on `rows` positions (a multiple of T).
  kernels::AttentionShape shape(int rows) const;
  // A tensor to save, in the stored type (kernels::stored_dtype); a saved one to compute with, in Scalar.
  tensor::Tensor keep(const tensor::Tensor& tensor, const char* label) const;
  tensor::Matrix<Scalar> computable(const tensor::Tensor& saved, const char* label) const;
  // pipeline.recompute = "selective", gemm path: saves again as "p" the
  // probabilities F built from `qkv` and did not keep.
  template <class Stored>
  void rebuild_probabilities(const kernels::AttentionShape& s, const tensor::ConstMatrix<Stored>& qkv,
                             Context& ctx) const;

  LayerEnvironment env_;
  int heads_;
  int context_;
  int dim_;
  int layer_;
  KernelChoice kernels_;
};

// Runs a position-wise layer on sequences: the rows x (T·in) input is seen as
// (rows·T) x in positions and the output likewise, without copies. Saves
// nothing itself; the inner layer keeps its state in the same context. In
// infer the rows already are positions, so they go to the inner layer as
// they are.
template <class Scalar>
class PerPosition final : public Layer<Scalar> {
 public:
  PerPosition(std::unique_ptr<Layer<Scalar>> inner, int positions);

  const char* kind() const override { return inner_->kind(); }
  int input_dim() const override { return positions_ * inner_->input_dim(); }
  int output_dim() const override { return positions_ * inner_->output_dim(); }
  int output_rows(int rows) const override { return inner_->output_rows(rows * positions_) / positions_; }
  int input_rows(int rows) const override { return inner_->input_rows(rows * positions_) / positions_; }
  std::vector<TensorDecl> saved(int rows) const override { return inner_->saved(rows * positions_); }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { inner_->backward_weight(ctx); }
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override {
    inner_->infer(inputs, outputs, batch);
  }
  int token_output_dim() const override { return inner_->token_output_dim(); }
  std::vector<Parameter<Scalar>> parameters() const override { return inner_->parameters(); }
  void weights_changed() override { inner_->weights_changed(); }

 private:
  // `tensor` (rows x (positions·width)) as (rows·positions) x width.
  tensor::Tensor by_position(const tensor::Tensor& tensor, int width) const;

  std::unique_ptr<Layer<Scalar>> inner_;
  int positions_;
};

// A pre-LayerNorm decoder block on rows x (T·dim): x + Attn(LN(x)), then
// x + MLP(LN(x)) with GELU. The output projections of both branches start
// with gpt2_residual_std under model.init = gpt2 (0.02 / sqrt(2·layers)).
template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_decoder_block(const ModelSpec& model, int index, KernelChoice kernels,
                                                  LayerEnvironment env);

// The head on rows x (T·dim): final LayerNorm and the LM projection to
// rows x (T·padded vocab) logits, the padding masked (Linear's real_outputs).
// Tied (model.tie_embeddings): the projection's weight is a copy of the
// token table (token_table_parameter) in its layout, drawn as the embedding
// draws it, and the two gradients are summed every step (Parameter::Tie).
inline constexpr const char* token_table_parameter = "layer0.token";  // the embedding is layer 0

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_lm_head(const ModelSpec& model, int index, KernelChoice kernels,
                                            LayerEnvironment env);

// A Llama block on rows x (T·dim), no biases: x + Attn(RMSNorm(x)) with the
// grouped QKV projection (model.kv_heads groups, RotaryQKV), then
// x + W_down(SwiGLU(W_gate|up RMSNorm(x))) of model.ffn_dim. A tensor rank
// holds heads/t query heads, kv_heads/t whole groups and ffn_dim/t columns;
// with t a multiple of kv_heads, the whole QKV projection (TensorSplit::
// replicated), of whose groups it uses the one its query heads share.
template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_llama_block(const ModelSpec& model, int index, KernelChoice kernels,
                                                LayerEnvironment env);

// A Llama head: the final RMSNorm and the LM projection, no bias; tied as make_lm_head's.
template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_llama_head(const ModelSpec& model, int index, KernelChoice kernels,
                                               LayerEnvironment env);

}  // namespace kpipe::model
