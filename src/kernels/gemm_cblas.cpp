// The host vendor path: a row-major CBLAS call, nothing else, so that its speed
// is the library's own (docs/performance.md measures exactly that).
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <string>
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

std::string cblas_kernel() {
  // Looked up at run time: the CBLAS found at configure time need not be OpenBLAS.
  using Corename = char* (*)();
  const auto corename = reinterpret_cast<Corename>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? std::string(corename()) : std::string();
}

BlasThreads cblas_threads() {
  using Count = int (*)();
  const auto threads = reinterpret_cast<Count>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const auto parallel = reinterpret_cast<Count>(::dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  BlasThreads blas;
  if (threads) blas.threads = std::max(1, threads());
  blas.own_pool = parallel && parallel() == 1;  // 0: sequential, 1: pthreads, 2: OpenMP
  return blas;
}

bool cblas_kernel_is_generic() {
  static const bool generic = [] {
    const std::string kernel = cblas_kernel();
    // OpenBLAS' x86-64 kernels older than AVX2, Intel's and AMD's.
    for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Opteron",
                            "Opteron(SSE3)", "Barcelona", "Bobcat", "Bulldozer", "Piledriver", "Nano"}) {
      if (kernel == old) return true;
    }
    return false;
  }();
  return generic;
}

template void cblas_gemm<float>(const GemmOperands<float>&);
template void cblas_gemm<double>(const GemmOperands<double>&);

}  // namespace kpipe::kernels::detail
