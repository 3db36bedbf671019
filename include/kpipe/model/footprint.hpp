#pragma once
// What one layer costs on one rank of its tensor group, from its spec alone:
// the parameters it holds, what it saves per microbatch, what it keeps from
// B to W and the sums it calls in the group. Each layer kind states its own
// (layer_kind.hpp) by composing the primitives of FootprintBuilder, which
// know the tensor-parallel split and sequence parallelism, so the memory
// estimate, the traffic prediction and the simulator agree with the layers
// for every kind, built-in or a user's. Sizes are in elements.

#include <cstdint>

#include "kpipe/kernels/attention.hpp"
#include "kpipe/model/layers/tensor_split.hpp"

namespace kpipe::model {

// Elements (or bytes) and calls on one link.
struct LinkVolume {
  std::int64_t bytes = 0;
  std::int64_t calls = 0;  // messages, or collectives

  LinkVolume& operator+=(const LinkVolume& other) {
    bytes += other.bytes;
    calls += other.calls;
    return *this;
  }
  LinkVolume times(std::int64_t n) const { return {bytes * n, calls * n}; }
};

// Where a layer runs: `rows` samples of one microbatch on one rank of a
// tensor group of `tensor_ranks`, split as the stage pairs it (`split`, for
// kinds that pair up: a kind's `pairs`), with the regions between the
// pairs sharded by rows or not, and whether it is the model's first layer
// (whose input has no gradient), and whether the layer saves only what B
// cannot rebuild cheaply (pipeline.recompute = "selective",
// LayerEnvironment::selective_recompute).
struct FootprintQuery {
  int rows = 1;
  int tensor_ranks = 1;
  bool sequence_parallel = false;
  TensorSplit split = TensorSplit::none;
  bool first_layer = false;
  kernels::AttentionPath attention = kernels::AttentionPath::gemm;
  bool selective_recompute = false;
};

// One layer on one rank. The sums are what the rank contributes to each
// collective (its buffer once, however the collective moves it).
struct LayerFootprint {
  std::int64_t parameters = 0;                // this rank's shards and whole parameters
  std::int64_t linear_weights = 0;            // its Linears' weight matrices, which compute.gemm = "packed" copies
  std::int64_t saved = 0;                     // saved in F for B, one microbatch
  std::int64_t kept_for_weight_gradient = 0;  // kept from B until W, one microbatch
  // Of those, what stays in the layer's scalar type under compute.precision
  // = bf16 and fp16, which keeps the rest in 2 bytes (kernels::stored_dtype):
  // per-row statistics (LayerNorm's 1/std, attention's log-sum-exp) and
  // token ids.
  std::int64_t saved_in_scalar = 0;
  std::int64_t kept_in_scalar = 0;
  // Alive only inside one F or B of one microbatch (attention's T x T
  // probabilities in inference, their gradient in B): the largest of the
  // layer's parts, since they run one after another.
  std::int64_t workspace = 0;
  // The outputs of the layer's parts in one F, the activations a composite
  // layer passes between them (B passes as many gradients): pooled float
  // buffers that stay allocated for the next microbatch. The largest of the
  // layers', like workspace.
  std::int64_t intermediates = 0;
  // Forward FLOPs of one microbatch: 2·in·out per Linear, 2·T·width per
  // position for causal attention's scores and weighted sum (half of the
  // full T x T products each); elementwise work is left out. With rows = 1
  // and t = 1 the layer's LayerSpec::flops, which the partition balances.
  std::int64_t forward_flops = 0;
  // Of those, what B runs again to rebuild what F did not save (selective
  // recomputation): the simulator adds that share of F to B.
  std::int64_t recompute_flops = 0;
  LinkVolume tensor_forward;   // the group's sums in F, one microbatch
  LinkVolume tensor_backward;  // and in B (and W's re-gathers)
  // Sequence parallelism: gradients computed from this rank's rows only,
  // summed over the group once a step (elements and sums).
  LinkVolume row_partial;

  LayerFootprint& operator+=(const LayerFootprint& other);
};

// Sums the footprints of a layer's parts, position by position: `rows`
// positions (samples, or samples·T for a transformer's position-wise parts).
// The regions between tensor-parallel pairs hold rows/t of them with
// sequence parallelism; a column-parallel Linear's output and a row-parallel
// one's input are always whole in rows and 1/t in width.
class FootprintBuilder {
 public:
  FootprintBuilder(const FootprintQuery& query, std::int64_t rows);

  // Rows in the regions between the pairs: rows/t with sequence parallelism.
  std::int64_t region_rows() const { return sequence_parallel_ ? rows_ / ranks_ : rows_; }
  std::int64_t rows() const { return rows_; }
  int ranks() const { return ranks_; }

  // LayerNorm over `width` features: x̂ and 1/std saved, x̂ and dy kept.
  FootprintBuilder& layer_norm(std::int64_t width);
  // RMSNorm: the same but for beta.
  FootprintBuilder& rms_norm(std::int64_t width);
  // A Linear `in` x `out` (+ bias) split `split`; `input_gradient` false for
  // a model's first layer outside sequence parallelism (no sum in B).
  FootprintBuilder& linear(std::int64_t in, std::int64_t out, TensorSplit split, bool input_gradient = true,
                           bool bias = true);
  // An elementwise function of `rows` x `width` saving its derivative.
  FootprintBuilder& elementwise(std::int64_t rows, std::int64_t width);
  // A linear map of the features (rotary QKV's rotations and repeats) to
  // `width` per row: its output, nothing saved (B needs only dy).
  FootprintBuilder& unsaved(std::int64_t width);
  // Causal attention over `positions`-long sequences (rows()/positions of
  // them) of `heads` heads of `head_dim` features each, on this rank; under
  // selective recomputation the gemm path's probabilities are rebuilt in B.
  FootprintBuilder& attention(std::int64_t heads, std::int64_t positions, std::int64_t head_dim,
                              kernels::AttentionPath path);
  const LayerFootprint& footprint() const { return footprint_; }

 private:
  FootprintBuilder& normalisation(std::int64_t width, int vectors);

  std::int64_t rows_;
  int ranks_;
  bool sequence_parallel_;
  bool selective_recompute_;
  LayerFootprint footprint_;
};

}  // namespace kpipe::model
