#pragma once
// What a model stage needs in memory on one rank, from its layers' own
// footprints (layer_kind.hpp): nothing is built or allocated, so a run can
// check that a model fits before it allocates it (`kpipe plan` prints it,
// `kpipe run` refuses a model that cannot fit). Sizes are in elements;
// multiply by the scalar's size.

#include <cstdint>

#include "kpipe/model/footprint.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

struct StageFootprint {
  std::int64_t parameters = 0;  // trainable values this rank holds (its shards, and whole parameters)
  // Kept from F until B/BW for one microbatch: the layers' saved tensors, or
  // with recomputation only the stage's input copy.
  std::int64_t stash_per_microbatch = 0;
  // What the layers save in F (the stash without recomputation; with it, what
  // B rebuilds for a moment before it computes the input gradient).
  std::int64_t saved_per_microbatch = 0;
  // Kept from B until W in split-backward schedules: each Linear's input and
  // output gradient, each LayerNorm's x̂ and output gradient.
  std::int64_t kept_for_weight_gradient = 0;
  // The largest temporary of one layer's F or B (LayerFootprint::workspace),
  // and the most activations one layer passes between its parts in F
  // (LayerFootprint::intermediates).
  std::int64_t workspace = 0;
  std::int64_t intermediates = 0;
  // Of stash_per_microbatch, saved_per_microbatch and kept_for_weight_gradient,
  // what stays in the scalar type under compute.precision = bf16 and fp16
  // (LayerFootprint::saved_in_scalar; with recomputation the first stage's
  // input, which is data).
  std::int64_t stash_in_scalar = 0;
  std::int64_t saved_in_scalar = 0;
  std::int64_t kept_in_scalar = 0;
  std::int64_t linear_weights = 0;         // the Linear layers' weight matrices, which compute.gemm = "packed" copies
  std::int64_t input_per_microbatch = 0;   // the stage's input rows × its input width
  std::int64_t output_per_microbatch = 0;  // its output rows × its output width
};

// What one microbatch's activations of a stage take, in bytes.
struct ActivationBytes {
  std::int64_t stash = 0;  // StageFootprint::stash_per_microbatch
  std::int64_t saved = 0;  // saved_per_microbatch
  std::int64_t kept = 0;   // kept_for_weight_gradient
};
// `footprint`'s activations at `stored_bytes` per element (2 for
// compute.precision = bf16 and fp16, else the scalar's), but what stays in the
// scalar type at `scalar_bytes`.
ActivationBytes activation_bytes(const StageFootprint& footprint, int scalar_bytes, int stored_bytes);

// The stage of `layers` on one rank: microbatches of query.rows samples, a
// tensor group of query.tensor_ranks (with query.sequence_parallel, a
// boundary holds a rank's rows/t), query.attention's saved tensors.
StageFootprint stage_footprint(const ModelSpec& model, LayerRange layers, const FootprintQuery& query, bool recompute);

}  // namespace kpipe::model
