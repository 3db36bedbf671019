// Between a projection's position-major columns and the heads-major stacks the
// attention kernels read (attention.hpp), and the choice of path.
#include <fmt/format.h>

#include "attention_common.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/attention.hpp"

namespace kpipe::kernels {

namespace detail {
void check_attention_shape(const AttentionShape& shape) {
  if (shape.batch_heads < 0 || shape.tokens < 1 || shape.head_dim < 1) {
    throw input_error(fmt::format("attention of {} sequence-heads, {} tokens and head size {} is empty or negative",
                                  shape.batch_heads, shape.tokens, shape.head_dim));
  }
}
}  // namespace detail

namespace {

// The stack's shape for X and checks both: X has whole sequences of `tokens`
// rows and room for heads · hd columns from `offset`.
template <class XView, class StackView>
AttentionShape layout_shape(const char* what, const XView& X, const StackView& stacked, int offset, int heads,
                            int tokens) {
  const auto cols = static_cast<long long>(X.extent(1));
  const long long hd = static_cast<long long>(stacked.extent(1));
  if (heads < 1 || tokens < 1 || X.extent(0) % static_cast<std::size_t>(tokens) != 0 || offset < 0 ||
      offset + heads * hd > cols) {
    throw input_error(
        fmt::format("{}: {} heads of {} features from column {} of {} in sequences of {} tokens do not fit", what,
                    heads, hd, offset, tensor::shape_string(X), tokens));
  }
  const AttentionShape shape{static_cast<int>(X.extent(0)) / tokens * heads, tokens, static_cast<int>(hd)};
  detail::require_stack(what, stacked, shape);
  return shape;
}

// Copies between the position-major X and the heads-major stack, either way
// (to_stack: X is read, else the stack is): the one index map of
// split_heads and merge_heads.
template <bool to_stack, class XView, class StackView>
void move_heads(const tensor::ExecutionSpace& space, const char* name, const XView& X, const StackView& stacked,
                int offset, int heads, int tokens) {
  const AttentionShape shape = layout_shape(name, X, stacked, offset, heads, tokens);
  const int hd = shape.head_dim;
  // A row per position (sequence s, position t) of X: each head's hd
  // features, contiguous on both sides, to or from its stack row.
  detail::for_each_row(
      space, name, static_cast<int>(X.extent(0)), KOKKOS_LAMBDA(const detail::Row& row, int i) {
        const int s = i / tokens;
        const int t = i % tokens;
        for (int h = 0; h < heads; ++h) {
          const auto x = &X(i, offset + h * hd);
          const auto y = &stacked((s * heads + h) * tokens + t, 0);
          detail::row_for(row, hd, [&](int d) {
            if constexpr (to_stack) {
              y[d] = x[d];
            } else {
              x[d] = y[d];
            }
          });
        }
      });
}

}  // namespace

template <class Scalar>
void split_heads(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                 int offset, int heads, int tokens, const tensor::Matrix<Scalar>& stacked) {
  move_heads<true>(space, "kpipe::kernels::split_heads", X, stacked, offset, heads, tokens);
}

template <class Scalar>
void merge_heads(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& stacked,
                 int offset, int heads, int tokens, const tensor::Matrix<Scalar>& X) {
  move_heads<false>(space, "kpipe::kernels::merge_heads", X, stacked, offset, heads, tokens);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                     \
  template void split_heads<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, int, int, int, \
                                    const tensor::Matrix<Scalar>&);                                                   \
  template void merge_heads<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&, int, int, int, \
                                    const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
