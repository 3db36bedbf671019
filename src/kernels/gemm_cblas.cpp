// The host vendor path: a row-major CBLAS call, nothing else, so that its speed
// is the library's own (docs/performance.md measures exactly that).
#include <cblas.h>

#include <type_traits>

#include "gemm_backends.hpp"

namespace kpipe::kernels::detail {

namespace {
CBLAS_TRANSPOSE cblas_trans(Trans trans) { return trans == Trans::no ? CblasNoTrans : CblasTrans; }
}  // namespace

template <class Scalar>
void cblas_gemm(const GemmOperands<Scalar>& op) {
  const auto ta = cblas_trans(op.trans_a);
  const auto tb = cblas_trans(op.trans_b);
  if constexpr (std::is_same_v<Scalar, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, op.m, op.n, op.k, op.alpha, op.a, op.lda, op.b, op.ldb, op.beta, op.c, op.ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, op.m, op.n, op.k, op.alpha, op.a, op.lda, op.b, op.ldb, op.beta, op.c, op.ldc);
  }
}

// CBLAS has no strided-batch call: one call per block, in ascending order.
template <class Scalar>
void cblas_gemm_batched(const BatchedGemmOperands<Scalar>& op) {
  GemmOperands<Scalar> block = op.first;
  for (int i = 0; i < op.batch; ++i) {
    block.a = op.first.a + i * op.stride_a;
    block.b = op.first.b + i * op.stride_b;
    block.c = op.first.c + i * op.stride_c;
    cblas_gemm(block);
  }
}

template void cblas_gemm<float>(const GemmOperands<float>&);
template void cblas_gemm<double>(const GemmOperands<double>&);
template void cblas_gemm_batched<float>(const BatchedGemmOperands<float>&);
template void cblas_gemm_batched<double>(const BatchedGemmOperands<double>&);

}  // namespace kpipe::kernels::detail
