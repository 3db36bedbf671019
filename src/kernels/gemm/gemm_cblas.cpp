// The host vendor path: a row-major CBLAS call, nothing else, so that its speed
// is the library's own (each CPU's GEMM row in docs/performance.md, e.g. "AMD
// EPYC, Zen 5", measures exactly that). In a threaded host build each call is
// one column slice of a product, on one of Kokkos' threads (gemm.cpp), and
// OpenBLAS keeps to that thread.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "gemm_backends.hpp"

namespace kpipe::kernels::detail {

namespace {

CBLAS_TRANSPOSE cblas_trans(Trans trans) { return trans == Trans::no ? CblasNoTrans : CblasTrans; }

// With Kokkos' threads running column slices (gemm.cpp), OpenBLAS' own pool
// (pthreads) would only spin beside them: it is told to use one thread, once.
void blas_on_one_thread() {
  static const bool done = [] {
    using SetThreads = void (*)(int);
    if (const auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
    return true;
  }();
  (void)done;
}

template <class Scalar>
void call_cblas(const GemmOperands<Scalar>& op) {
  const auto ta = cblas_trans(op.trans_a);
  const auto tb = cblas_trans(op.trans_b);
  if constexpr (std::is_same_v<Scalar, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, op.m, op.n, op.k, op.alpha, op.a, op.lda, op.b, op.ldb, op.beta, op.c, op.ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, op.m, op.n, op.k, op.alpha, op.a, op.lda, op.b, op.ldb, op.beta, op.c, op.ldc);
  }
}

}  // namespace

template <class Scalar>
void cblas_gemm(const GemmOperands<Scalar>& op) {
  if (host_threads() > 1) blas_on_one_thread();
  call_cblas(op);
}

std::string cblas_kernel() {
  // Looked up at run time: the CBLAS found at configure time need not be OpenBLAS.
  using Corename = char* (*)();
  const auto corename = reinterpret_cast<Corename>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? std::string(corename()) : std::string();
}

std::string cblas_library() {
  const std::string kernel = cblas_kernel();
  return kernel.empty() ? "cblas" : "cblas (OpenBLAS, " + kernel + " kernel)";
}

BlasThreads cblas_threads() {
  if (host_threads() > 1) blas_on_one_thread();
  using Count = int (*)();
  const auto threads = reinterpret_cast<Count>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const auto parallel = reinterpret_cast<Count>(::dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  BlasThreads blas;
  if (threads) blas.threads = std::max(1, threads());
  blas.own_pool = parallel && parallel() == 1;  // 0: sequential, 1: pthreads, 2: OpenMP
  return blas;
}

VectorIsa cblas_vector_isa() {
  static const VectorIsa isa = [] {
    const std::string kernel = cblas_kernel();
    const auto named = [&kernel](std::initializer_list<const char*> names) {
      return std::any_of(names.begin(), names.end(), [&kernel](const char* name) { return kernel == name; });
    };
    // OpenBLAS' x86-64 kernels, Intel's and AMD's, by the vectors they use.
    if (named({"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Opteron",
               "Opteron(SSE3)", "Barcelona", "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Nano"})) {
      return VectorIsa::pre_avx2;
    }
    if (named({"Haswell", "Zen", "Excavator"})) return VectorIsa::avx2;
    if (named({"SkylakeX", "Cooperlake", "SapphireRapids"})) return VectorIsa::avx512;
    return VectorIsa::unknown;
  }();
  return isa;
}

template void cblas_gemm<float>(const GemmOperands<float>&);
template void cblas_gemm<double>(const GemmOperands<double>&);

}  // namespace kpipe::kernels::detail
