#pragma once
// What a model stage needs in memory, from its layer specs alone: nothing is
// built or allocated, so a run can check that a model fits before it
// allocates it (`kpipe plan` prints it, `kpipe run` refuses a model that
// cannot fit). Sizes are in elements; multiply by the scalar's size.

#include <cstdint>

#include "kpipe/kernels/attention.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

struct StageFootprint {
  std::int64_t parameters = 0;  // trainable values (weights, biases, norm scales)
  // Kept from F until B/BW for one microbatch of `rows` samples: the layers'
  // saved tensors, or with recomputation only the stage's input copy.
  std::int64_t stash_per_microbatch = 0;
  // What the layers save in F (the stash without recomputation; with it, what
  // B rebuilds for a moment before it computes the input gradient).
  std::int64_t saved_per_microbatch = 0;
  // Kept from B until W in split-backward schedules: each Linear's input and
  // output gradient, each LayerNorm's x̂ and output gradient.
  std::int64_t kept_for_weight_gradient = 0;
  std::int64_t linear_weights = 0;         // the Linear layers' weight matrices, which compute.gemm = "packed" copies
  std::int64_t input_per_microbatch = 0;   // rows × the stage's input width
  std::int64_t output_per_microbatch = 0;  // rows × the stage's output width
};

// Trainable values of one layer of `model`: a Linear has in·out + out; a
// residual block a LayerNorm (2·w) and two Linears of w × w; a decoder block
// two LayerNorms and its four Linears.
std::int64_t layer_parameters(const ModelSpec& model, const LayerSpec& layer);
// The weight matrices of one layer's Linears (no biases, norms or
// embedding tables): what a packed-weight GEMM keeps a reordered copy of.
std::int64_t layer_linear_weights(const ModelSpec& model, const LayerSpec& layer);
// What one layer saves for backward, for `rows` samples: a Linear its input,
// an activation its input, a LayerNorm the normalised input and 1/std,
// attention Q, K, V and its probabilities (gemm) or output and log-sum-exp
// (fused).
std::int64_t layer_saved(const ModelSpec& model, const LayerSpec& layer, int rows,
                         kernels::AttentionPath attention = kernels::AttentionPath::gemm);
// What one layer keeps between its input gradient (B) and weight gradient (W).
std::int64_t layer_kept_for_weight_gradient(const ModelSpec& model, const LayerSpec& layer, int rows);

StageFootprint stage_footprint(const ModelSpec& model, LayerRange layers, int rows, bool recompute,
                               kernels::AttentionPath attention = kernels::AttentionPath::gemm);

}  // namespace kpipe::model
