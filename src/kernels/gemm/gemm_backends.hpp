#pragma once
// The backends behind kernels::gemm. gemm.cpp checks shapes and picks one;
// each backend lives in its own file and is compiled only where it exists.

#include <memory>
#include <string>

#include "kpipe/kernels/gemm.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels::detail {

// A row-major GEMM as BLAS sees it: C (m x n) = alpha op(A) op(B) + beta C,
// op(A) m x k, op(B) k x n, each matrix with its leading dimension. A and B
// hold In: Scalar, or bfloat16 or float16 for a float C (compute.precision =
// bf16 or fp16).
template <class Scalar, class In = Scalar>
struct GemmOperands {
  Trans trans_a;
  Trans trans_b;
  int m;
  int n;
  int k;
  Scalar alpha;
  const In* a;
  int lda;
  const In* b;
  int ldb;
  Scalar beta;
  Scalar* c;
  int ldc;
};

// `batch` GEMMs of the same shape, operands of block i at first.a + i·stride_a
// and so on (in elements).
template <class Scalar, class In = Scalar>
struct BatchedGemmOperands {
  GemmOperands<Scalar, In> first;
  int batch;
  long long stride_a;
  long long stride_b;
  long long stride_c;
};

// Kokkos' host threads: in a threaded host build each product's column
// slices run on them, one single-threaded library call each (gemm.cpp).
int host_threads();

// OpenBLAS or any CBLAS, for host memory (gemm_cblas.cpp, with KPIPE_HAVE_CBLAS).
template <class Scalar>
void cblas_gemm(const GemmOperands<Scalar>& op);
// The kernel OpenBLAS picked for this CPU ("SkylakeX", "Haswell", "Zen", or
// "Prescott" where it does not know the CPU), "" for another CBLAS.
std::string cblas_kernel();
// For the run log: "cblas (OpenBLAS, SkylakeX kernel)", and in a threaded
// host build how cblas_gemm splits a product over Kokkos' threads.
std::string cblas_library();
// OpenBLAS' threads, looked up at run time like cblas_kernel.
BlasThreads cblas_threads();

// A float32 weight gradient's product, C += A^T B over a microbatch's rows
// with C at least a core's L2, streamed through C with AVX-512
// (gemm_weight_gradient.cpp). streams_weight_gradients: whether this CPU and
// build do at all; streamed_weight_gradient: whether the whole product `op`
// does (decided on the whole product, so every column slice of it streams
// too and the result does not depend on the thread count);
// stream_weight_gradient: runs it, or a slice of it, on the calling thread.
bool streams_weight_gradients();
bool streamed_weight_gradient(const GemmOperands<float>& op);
void stream_weight_gradient(const GemmOperands<float>& op);
std::string weight_gradient_streaming();  // for the run log

// The x86-64 vector instructions a GEMM library's kernels use, oldest first.
enum class VectorIsa { pre_avx2, avx2, avx512, unknown };
// Those of OpenBLAS' kernel: pre_avx2 for Prescott, Nehalem, Sandybridge,
// Barcelona, ... (on a CPU with AVX2, OpenBLAS did not recognise the CPU, as
// 0.3.21 runs Prescott's SSE3 code on Sapphire Rapids), avx2 for Haswell and
// Zen (0.3.21 runs Haswell's on AMD Zen 4), avx512 for SkylakeX and newer;
// unknown for another CBLAS or a kernel name this list does not know.
VectorIsa cblas_vector_isa();

// cuBLAS on the space's stream, for CudaSpace (gemm_cublas.cpp, with KOKKOS_ENABLE_CUDA).
template <class Scalar>
void cublas_gemm(const tensor::ExecutionSpace& space, const GemmOperands<Scalar>& op);
template <class Scalar>
void cublas_gemm_batched(const tensor::ExecutionSpace& space, const BatchedGemmOperands<Scalar>& op);
// cublasGemmEx on bfloat16 or float16 A and B with float32 C and float32 sums
// (CUBLAS_COMPUTE_32F: tensor cores where the GPU has them, never 16-bit sums).
template <class In>
void cublas_gemm_mixed(const tensor::ExecutionSpace& space, const GemmOperands<float, In>& op);
template <class In>
void cublas_gemm_batched_mixed(const tensor::ExecutionSpace& space, const BatchedGemmOperands<float, In>& op);
// "cuBLAS 13.0.0", for mixed_gemm_library().
std::string cublas_version();

// The Kokkos TeamPolicy kernel with scratch-memory tiles, for every backend:
// a GEMM per matrix of the batches (a batch of one for a plain GEMM). A and B
// hold In (Scalar, or bfloat16 or float16 widened to a float Scalar as tiles load).
template <class In, class Scalar>
void portable_gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, Scalar alpha,
                   const ConstBatch<In>& A, const ConstBatch<In>& B, Scalar beta, const Batch<Scalar>& C);

// The packed copies of one weight behind PackedWeight (packed_gemm.hpp). A
// host-side interface: the backend's library types stay out of the headers.
template <class Scalar>
class PackedBackend {
 public:
  virtual ~PackedBackend() = default;
  virtual void invalidate() = 0;
  // op.c = op.a op(op.b) (+ bias, a 1 x n row, unless null) with alpha 1,
  // beta 0 and op.a not transposed. op.b is the weight W, op.trans_b says
  // whether the product is by W (forward) or by Wᵀ (input gradient); each has
  // its own packed copy, and op.b is read only when that copy is stale.
  virtual void product(const GemmOperands<Scalar>& op, const Scalar* bias) = 0;
  // The same on bfloat16 X (or dY) and W, float32 C and bias
  // (compute.precision = bf16), W's copy packed in bfloat16. False where the
  // backend packs only Scalar, and the caller runs gemm_bf16 instead.
  virtual bool product_bf16(const GemmOperands<Scalar, tensor::BFloat16>& /*op*/, const Scalar* /*bias*/) {
    return false;
  }
  // op.c = op.alpha op(op.a) op(op.b) + op.beta op.c on the caller's
  // row-major operands, nothing packed: the weight gradient Xᵀ dY.
  virtual void gemm(const GemmOperands<Scalar>& op) = 0;
};

// oneDNN matmul on blocked weights and onednn_gemm for the weight gradient, for
// host memory (gemm_onednn.cpp, with KPIPE_HAVE_DNNL).
std::unique_ptr<PackedBackend<float>> make_onednn_packed();
// Whether oneDNN picks a blocked weights layout on this CPU; where it does
// not, packing buys nothing and the packed path runs the vendor GEMM.
bool onednn_blocks_weights();
// "oneDNN <version>", for packed_gemm_library().
std::string onednn_version();
// C = alpha op(A) op(B) + beta C on row-major float32, bfloat16 or float16
// A and B with oneDNN's matmul primitive (one per shape and thread count),
// never dnnl::sgemm: oneDNN 2.6.3's sgemm corrupts the heap when a signal (a
// preemption signal) arrives during the call, the primitive does not. For
// bfloat16 and float16 only where onednn_kernel() names a kernel. `threads`
// above one only where onednn_shares_host_threads().
template <class In>
void onednn_gemm(const GemmOperands<float, In>& op, int threads = 1);
// The same on a batch: one matmul over the matrices the strides apart.
template <class In>
void onednn_gemm_batched(const BatchedGemmOperands<float, In>& op, int threads = 1);
// Whether oneDNN's threads are Kokkos' host threads: both on OpenMP, one
// runtime, so a product can run on the rank's threads from outside Kokkos'
// parallel regions with no second pool beside them.
bool onednn_shares_host_threads();
// How many of the rank's host threads a product of n output columns is
// worth: one per 64 columns, at most all of them (gemm.cpp).
int column_parts(int n);
// The threads a whole oneDNN product of n output columns runs on here:
// column_parts(n) where onednn_shares_host_threads() and the caller is not
// in a parallel region, else one.
int onednn_threads(int n);
// Those oneDNN's JIT kernels use on this CPU.
VectorIsa onednn_vector_isa();
// The kernel oneDNN picks for a matmul of In operands with float32 sums on
// this CPU ("brg:avx512_core_amx_bf16"), or "" where it has none but its
// reference loops, which are slower than widening to float32 for the vendor
// GEMM (oneDNN 2.6 has no float16 matmul on any CPU).
template <class In>
std::string onednn_kernel();

// libxsmm JIT kernels on weights packed in panels of libxsmm_panel_width
// columns (four AVX2 vectors), the vendor GEMM for the weight gradient, for
// host memory (gemm_libxsmm.cpp, with KPIPE_HAVE_LIBXSMM).
inline constexpr int libxsmm_panel_width = 32;
std::unique_ptr<PackedBackend<float>> make_libxsmm_packed();
// Whether libxsmm generates kernels for this CPU (AVX2 or newer).
bool libxsmm_available();

}  // namespace kpipe::kernels::detail
