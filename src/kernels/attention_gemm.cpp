// The gemm attention path: the four products of attention are batched GEMMs
// through the GEMM dispatch (OpenBLAS or cuBLAS when compute.gemm = vendor),
// and the only other work is one causal softmax kernel forward and one softmax
// backward kernel. The products run over the full T x T scores, masked
// entries included: a dense BLAS call beats skipping half of them by hand.
#include "attention_common.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

namespace {

// Row r of P holds scores of position t = r mod T; it becomes the softmax of
// its entries 0..t, and the masked entries above the diagonal exact zeros.
// The loops run over the valid entries rounded up to whole vectors of lanes
// and mask by selection: the same results as loops over the valid entries (a
// masked entry adds an exact zero to the sum), without the scalar remainders
// that rows of 1..T valid entries would leave.
template <class Scalar>
void causal_softmax(const tensor::ExecutionSpace& space, int tokens, const tensor::Matrix<Scalar>& P) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_causal_softmax", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int valid = r % tokens + 1;
        const int used = detail::whole_lanes(valid, tokens);
        Scalar* const p = &P(r, 0);
        const Scalar max = detail::row_max(row, used, [&](int j) { return j < valid ? p[j] : p[0]; });
        detail::row_for(row, used, [&](int j) { p[j] = j < valid ? detail::softmax_exp(p[j] - max) : Scalar(0); });
        row.team_barrier();
        // One division per row: a vector division per entry cost as much as the exponentials.
        const Scalar inverse = Scalar(1) / detail::row_sum(row, used, [&](int j) { return p[j]; });
        detail::row_for(row, tokens, [&](int j) { p[j] = j < used ? p[j] * inverse : Scalar(0); });
      });
}

// dP becomes dS = scale · P ∘ (dP − rowsum(dP ∘ P)): the gradient of the
// softmax, with the 1/sqrt(hd) of the scores folded in, zero where masked.
template <class Scalar>
void causal_softmax_backward(const tensor::ExecutionSpace& space, int tokens, Scalar scale,
                             const tensor::ConstMatrix<Scalar>& P, const tensor::Matrix<Scalar>& dP) {
  detail::for_each_row(
      space, "kpipe::kernels::attention_softmax_backward", static_cast<int>(P.extent(0)),
      KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int valid = r % tokens + 1;
        const Scalar* const p = &P(r, 0);
        Scalar* const dp = &dP(r, 0);
        const int used = detail::whole_lanes(valid, tokens);
        const Scalar dot = detail::row_sum(row, used, [&](int j) { return j < valid ? dp[j] * p[j] : Scalar(0); });
        detail::row_for(row, tokens, [&](int j) { dp[j] = j < valid ? scale * p[j] * (dp[j] - dot) : Scalar(0); });
      });
}

}  // namespace

template <class Scalar>
void attention_forward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                            const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V, const tensor::Matrix<Scalar>& P,
                            const tensor::Matrix<Scalar>& O, GemmPath gemm) {
  detail::check_attention_shape(shape);
  detail::require_stack("attention queries", Q, shape);
  detail::require_stack("attention keys", K, shape);
  detail::require_stack("attention values", V, shape);
  detail::require_stack("attention output", O, shape);
  tensor::require_shape("attention probabilities", P, detail::stack_rows(shape), shape.tokens);
  if (shape.batch_heads == 0) return;
  const int blocks = shape.batch_heads;
  gemm_batched<Scalar>(space, blocks, Trans::no, Trans::yes, detail::softmax_scale<Scalar>(shape), Q, K, Scalar(0), P,
                       gemm);
  causal_softmax<Scalar>(space, shape.tokens, P);
  gemm_batched<Scalar>(space, blocks, Trans::no, Trans::no, Scalar(1), P, V, Scalar(0), O, gemm);
}

template <class Scalar>
void attention_backward_gemm(const tensor::ExecutionSpace& space, const AttentionShape& shape,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Q,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& K,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& V,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& P,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dO,
                             const tensor::Matrix<Scalar>& dP, const tensor::Matrix<Scalar>& dQ,
                             const tensor::Matrix<Scalar>& dK, const tensor::Matrix<Scalar>& dV, GemmPath gemm) {
  detail::check_attention_shape(shape);
  detail::require_stack("attention queries", Q, shape);
  detail::require_stack("attention keys", K, shape);
  detail::require_stack("attention values", V, shape);
  detail::require_stack("attention output gradient", dO, shape);
  detail::require_stack("attention query gradient", dQ, shape);
  detail::require_stack("attention key gradient", dK, shape);
  detail::require_stack("attention value gradient", dV, shape);
  tensor::require_shape("attention probabilities", P, detail::stack_rows(shape), shape.tokens);
  tensor::require_shape("attention probability gradient", dP, detail::stack_rows(shape), shape.tokens);
  if (shape.batch_heads == 0) return;
  const int blocks = shape.batch_heads;
  const Scalar one = 1;
  const Scalar zero = 0;
  gemm_batched<Scalar>(space, blocks, Trans::yes, Trans::no, one, P, dO, zero, dV, gemm);
  gemm_batched<Scalar>(space, blocks, Trans::no, Trans::yes, one, dO, V, zero, dP, gemm);
  causal_softmax_backward<Scalar>(space, shape.tokens, detail::softmax_scale<Scalar>(shape), P, dP);
  gemm_batched<Scalar>(space, blocks, Trans::no, Trans::no, one, dP, K, zero, dQ, gemm);
  gemm_batched<Scalar>(space, blocks, Trans::yes, Trans::no, one, dP, Q, zero, dK, gemm);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                      \
  template void attention_forward_gemm<Scalar>(const tensor::ExecutionSpace&, const AttentionShape&,                   \
                                               const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, \
                                               const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,      \
                                               const tensor::Matrix<Scalar>&, GemmPath);                               \
  template void attention_backward_gemm<Scalar>(                                                                       \
      const tensor::ExecutionSpace&, const AttentionShape&, const tensor::ConstMatrix<Scalar>&,                        \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,      \
      const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&,                \
      const tensor::Matrix<Scalar>&, const tensor::Matrix<Scalar>&, GemmPath);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
