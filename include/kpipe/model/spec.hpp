#pragma once
// What model a deck describes: its family, widths, activation and loss, and
// the list of its partitionable layers (config::model_layer_count counts them
// the same way).

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/kernels/elementwise.hpp"

namespace kpipe::model {

using config::LossKind;
using config::ModelKind;

struct LayerKind;  // layer_kind.hpp: the registry of kinds

// The partition unit, built by its kind (layer_kind.hpp). An mlp has one
// linear_activation layer per hidden width and a linear output layer; a
// residual_mlp has a linear input projection, one residual_block (LN ->
// Linear -> activation -> Linear -> +x) per hidden width and a linear output
// layer. A transformer has the embedding (token and position), one
// pre-LayerNorm decoder_block (x + Attn(LN(x)), then x + MLP(LN(x))) per
// model.layers, and the lm_head (final LN, LM projection).
//
// Widths are per sample: a transformer's layers see T positions per sample,
// so its block is T·dim -> T·dim. `flops` is the forward FLOPs of one sample.
struct LayerSpec {
  const LayerKind* kind = nullptr;
  int input_dim = 0;
  int output_dim = 0;
  std::int64_t flops = 0;
};

struct ModelSpec {
  ModelKind kind = ModelKind::mlp;
  int input_dim = 0;
  std::vector<int> hidden;
  int output_dim = 0;
  kernels::Activation activation = kernels::Activation::gelu;
  LossKind loss = LossKind::cross_entropy;
  std::uint64_t seed = 0;
  config::InitKind init = config::InitKind::automatic;
  // transformer: vocabulary, context T, width, heads, blocks, MLP ratio. Its
  // samples are sequences: input_dim = T token ids, output_dim = T·padded_vocab(1) logits.
  int vocab = 0;
  // The embedding and LM head hold padded_vocab(t) tokens (model.vocab_divisible_by).
  int vocab_divisible_by = 1;
  bool head_bias = true;        // the LM head's Linear has a bias (model.head_bias)
  bool tie_embeddings = false;  // the LM head's weight is the token table's transpose (model.tie_embeddings)
  int context = 0;
  int dim = 0;
  int heads = 1;
  int blocks = 0;
  int mlp_ratio = 4;
  // The registered layer kind of the repeated block (model.block): a
  // residual_mlp's blocks or a transformer's decoder blocks, width-preserving.
  // Empty: the family's own (residual_block, decoder_block).
  std::string block;

  // Predictions per sample: T for a transformer (one per position), else 1.
  // The loss treats each as a sample of its own (targets hold rows·positions
  // labels), so the mean loss is over all B·T positions.
  int positions() const { return kind == ModelKind::transformer ? context : 1; }
  // The vocabulary rounded up to a multiple of vocab_divisible_by · t, so each
  // of t tensor ranks holds an equal share (Megatron-LM). Tokens at or past
  // vocab are padding: never an input, their logits masked.
  int padded_vocab(int tensor_ranks) const {
    const int multiple = vocab_divisible_by * tensor_ranks;
    return (vocab + multiple - 1) / multiple * multiple;
  }

  // The model of a run configuration.
  static ModelSpec from_config(const config::ModelConfig& config);

  // Global layer L is layers()[L]. Throws an input error for an invalid model
  // (a residual_mlp without hidden widths or with unequal ones).
  std::vector<LayerSpec> layers() const;
  int layer_count() const { return static_cast<int>(layers().size()); }
};

// Forward FLOPs of one sample through a layer, as its kind states them
// (LayerFootprint::forward_flops).
inline std::int64_t forward_flops(const LayerSpec& layer) { return layer.flops; }

// The model FLOPs of one sample's training step: its forward, and the input
// and weight gradients at twice that (3 x forward, as Megatron-LM and MFU
// figures count them; recomputation's repeated work is not model FLOPs).
std::int64_t training_flops_per_sample(const ModelSpec& model);

}  // namespace kpipe::model
