// The host vendor path: a row-major CBLAS call, nothing else, so that its speed
// is the library's own (docs/performance.md measures exactly that). In a
// threaded host build (OpenMP) a product splits its output columns over
// Kokkos' threads, each a single-threaded CBLAS call on its slice: the GEMMs
// run in the rank's one threading runtime, no BLAS pool spins beside Kokkos'
// threads, and each thread packs only its slice of op(B). OpenBLAS' own
// threading of the Linear's 32-row products split their rows and packed all
// of op(B) in each thread: 1.06-1.12x on two threads, against 1.58x split by
// columns (docs/performance.md, "Portability study").
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "gemm_backends.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels::detail {

namespace {

using Host = Kokkos::DefaultHostExecutionSpace;

CBLAS_TRANSPOSE cblas_trans(Trans trans) { return trans == Trans::no ? CblasNoTrans : CblasTrans; }

// Columns of C below which a slice is not worth a thread of its own.
constexpr int min_columns_per_thread = 64;

int host_threads() { return tensor::compat::concurrency(Host()); }

// With Kokkos' threads running the slices, OpenBLAS' own pool (pthreads)
// would only spin beside them: it is told to use one thread, once.
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

// How many column slices a product of n columns is split into.
int column_parts(int n) { return std::clamp(n / min_columns_per_thread, 1, host_threads()); }

}  // namespace

template <class Scalar>
void cblas_gemm(const GemmOperands<Scalar>& op) {
  const int parts = column_parts(op.n);
  if (parts == 1 || tensor::compat::in_host_parallel_region()) {
    call_cblas(op);
    return;
  }
  blas_on_one_thread();
  // Slice `part` of C's columns and of op(B)'s: columns of B (row-major k x
  // n), or rows of B when it is transposed (n x k).
  Kokkos::parallel_for(
      "kpipe::kernels::cblas_gemm_columns", Kokkos::RangePolicy<Host>(0, parts), [&op, parts](int part) {
        const int first = static_cast<int>(static_cast<long long>(op.n) * part / parts);
        const int last = static_cast<int>(static_cast<long long>(op.n) * (part + 1) / parts);
        GemmOperands<Scalar> slice = op;
        slice.n = last - first;
        slice.b = op.b + (op.trans_b == Trans::no ? first : static_cast<std::ptrdiff_t>(first) * op.ldb);
        slice.c = op.c + first;
        call_cblas(slice);
      });
  tensor::compat::fence(Host(), "kpipe::kernels::cblas_gemm_columns");
}

std::string cblas_kernel() {
  // Looked up at run time: the CBLAS found at configure time need not be OpenBLAS.
  using Corename = char* (*)();
  const auto corename = reinterpret_cast<Corename>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return corename ? std::string(corename()) : std::string();
}

std::string cblas_library() {
  const std::string kernel = cblas_kernel();
  std::string library = kernel.empty() ? "cblas" : "cblas (OpenBLAS, " + kernel + " kernel)";
  if (const int threads = host_threads(); threads > 1) {
    library += ", output columns split over " + std::to_string(threads) + " Kokkos threads, one BLAS thread each";
  }
  return library;
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
