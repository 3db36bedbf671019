#include "kpipe/model/footprint.hpp"

#include <algorithm>

namespace kpipe::model {

LayerFootprint& LayerFootprint::operator+=(const LayerFootprint& other) {
  parameters += other.parameters;
  linear_weights += other.linear_weights;
  saved += other.saved;
  kept_for_weight_gradient += other.kept_for_weight_gradient;
  saved_in_scalar += other.saved_in_scalar;
  kept_in_scalar += other.kept_in_scalar;
  workspace = std::max(workspace, other.workspace);
  intermediates = std::max(intermediates, other.intermediates);
  forward_flops += other.forward_flops;
  recompute_flops += other.recompute_flops;
  tensor_forward += other.tensor_forward;
  tensor_backward += other.tensor_backward;
  row_partial += other.row_partial;
  return *this;
}

FootprintBuilder::FootprintBuilder(const FootprintQuery& query, std::int64_t rows)
    : rows_(rows),
      ranks_(query.tensor_ranks),
      sequence_parallel_(query.sequence_parallel && query.tensor_ranks > 1),
      selective_recompute_(query.selective_recompute) {}

FootprintBuilder& FootprintBuilder::layer_norm(std::int64_t width) { return normalisation(width, 2); }

FootprintBuilder& FootprintBuilder::rms_norm(std::int64_t width) { return normalisation(width, 1); }

// gamma, and beta for LayerNorm: `vectors` of `width`.
FootprintBuilder& FootprintBuilder::normalisation(std::int64_t width, int vectors) {
  const std::int64_t rows = region_rows();
  footprint_.parameters += vectors * width;
  footprint_.saved += rows * (width + 1);
  footprint_.saved_in_scalar += rows;
  footprint_.intermediates += rows * width;
  footprint_.kept_for_weight_gradient += 2 * rows * width;
  if (sequence_parallel_) footprint_.row_partial += {vectors * width, vectors};
  return *this;
}

// docs/model.md "Tensor parallelism": a column-parallel Linear sums its input
// gradient in B, a row-parallel one its output in F. With sequence
// parallelism a column-parallel Linear all-gathers its input rows in F and
// again in W (it keeps only its own) and reduce-scatters its input gradient
// in B; a row-parallel one reduce-scatters its output in F and all-gathers
// its output gradient in B. A reduce-scatter contributes the whole buffer,
// an all-gather this rank's rows. A replicated Linear moves what a
// column-parallel one does and sums its weight gradient once a step.
FootprintBuilder& FootprintBuilder::linear(std::int64_t in, std::int64_t out, TensorSplit split, bool input_gradient,
                                           bool bias) {
  const std::int64_t t = ranks_, rows = rows_, region = region_rows();
  const std::int64_t biases = bias ? out : 0;
  LayerFootprint& f = footprint_;
  const auto column_traffic = [&] {
    if (sequence_parallel_) {
      f.tensor_forward += {region * in, 1};
      f.tensor_backward += {rows * in + region * in, 2};
    } else if (input_gradient) {
      f.tensor_backward += {rows * in, 1};
    }
  };
  const bool whole = split == TensorSplit::none || split == TensorSplit::replicated;
  f.forward_flops += 2 * rows * in * out / (whole ? 1 : t);
  switch (ranks_ == 1 ? TensorSplit::none : split) {
    case TensorSplit::none:
      f.intermediates += region * out;
      f.parameters += in * out + biases;
      f.linear_weights += in * out;
      f.saved += region * in;
      f.kept_for_weight_gradient += region * (in + out);
      if (sequence_parallel_) f.row_partial += {in * out + biases, bias ? 2 : 1};
      break;
    case TensorSplit::column:
      f.intermediates += rows * out / t;
      f.parameters += in * out / t + biases / t;
      f.linear_weights += in * out / t;
      f.saved += region * in;
      f.kept_for_weight_gradient += region * in + rows * out / t;
      column_traffic();
      break;
    case TensorSplit::replicated:
      f.intermediates += rows * out;
      f.parameters += in * out + biases;
      f.linear_weights += in * out;
      f.saved += region * in;
      f.kept_for_weight_gradient += region * in + rows * out;
      f.row_partial += {in * out + biases, bias ? 2 : 1};
      column_traffic();
      break;
    case TensorSplit::row:
      f.intermediates += rows * out;
      f.parameters += in * out / t + biases;
      f.linear_weights += in * out / t;
      f.saved += rows * in / t;
      f.kept_for_weight_gradient += rows * in / t + rows * out;
      f.tensor_forward += {rows * out, 1};
      if (sequence_parallel_) f.tensor_backward += {region * out, 1};
      break;
  }
  return *this;
}

FootprintBuilder& FootprintBuilder::unsaved(std::int64_t width) {
  footprint_.intermediates += rows_ * width;
  return *this;
}

FootprintBuilder& FootprintBuilder::elementwise(std::int64_t rows, std::int64_t width) {
  footprint_.saved += rows * width;
  footprint_.intermediates += rows * width;
  return *this;
}

// The GEMM path saves the fused Q|K|V projection and the probabilities, the
// fused one Q, K, V, the output and the log-sum-exp; B frees them all. The
// GEMM path's T x T probabilities are also a workspace: F without a stash
// (inference) builds them, B builds their gradient. Selective recomputation
// keeps only the projection and rebuilds the probabilities in B, the scores'
// product (half of F's FLOPs) and the softmax, beside their gradient.
FootprintBuilder& FootprintBuilder::attention(std::int64_t heads, std::int64_t positions, std::int64_t head_dim,
                                              kernels::AttentionPath path) {
  const std::int64_t width = heads * head_dim;
  footprint_.forward_flops += 2 * rows_ * positions * width;
  footprint_.intermediates += rows_ * width;
  if (path == kernels::AttentionPath::fused) {
    footprint_.saved += 4 * rows_ * width + rows_ * heads;
    footprint_.saved_in_scalar += rows_ * heads;
    return *this;
  }
  const std::int64_t probabilities = rows_ * heads * positions;
  footprint_.saved += 3 * rows_ * width + (selective_recompute_ ? 0 : probabilities);
  footprint_.workspace = std::max(footprint_.workspace, (selective_recompute_ ? 2 : 1) * probabilities);
  if (selective_recompute_) footprint_.recompute_flops += rows_ * positions * width;
  return *this;
}

}  // namespace kpipe::model
