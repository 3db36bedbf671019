#pragma once
// The one GEMM of kpipe (DESIGN.md §3). The vendor path hands the call to the
// BLAS that serves the matrices' memory space (CBLAS on the host, cuBLAS in
// CudaSpace; on the host float32 goes to oneDNN's matmul instead where
// OpenBLAS' kernel for the CPU has narrower vectors than oneDNN's, or both
// have AVX-512 and oneDNN gets whole products, as vendor_gemm_library()
// says); the portable path is a Kokkos TeamPolicy kernel that tiles through
// scratch memory and runs on every backend. The deck chooses with
// compute.gemm; where no vendor BLAS exists the portable kernel serves both.
// The packed path (packed_gemm.hpp) is a property of a weight, not of a call:
// gemm() runs GemmPath::packed as the vendor path.

#include <string>
#include <string_view>

#include "kpipe/kernels/choices.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels {

enum class Trans { no, yes };
// The library behind GemmPath::vendor in this build on this CPU: "cblas
// (OpenBLAS, SkylakeX kernel)", "oneDNN 2.6.3 matmul for float32 and cblas for
// float64, as ...", "cuBLAS" and its version, or "portable" when there is
// none for the default memory space.
std::string vendor_gemm_library();

// The vendor BLAS' own threads: OpenBLAS' openblas_get_num_threads (1 for a
// library that does not say), and whether they are a pool of its own beside
// the caller's threads (OpenBLAS' pthreads build) rather than the caller's
// OpenMP runtime or none.
struct BlasThreads {
  int threads = 1;
  bool own_pool = false;
};
BlasThreads vendor_blas_threads();

// Whether gemm on `path`, called by one thread of a host parallel region,
// runs whole on that thread with no Kokkos dispatch of its own (which would
// wait for the region's lock): the host library's products, bias and column
// sums of a ColumnEpilogue included. Not the portable kernel, not cuBLAS.
bool gemm_on_calling_thread(GemmPath path);

// C = alpha * op(A) * op(B) + beta * C with op(X) = X or X^T. As in BLAS,
// beta == 0 overwrites C without reading it. Each path is deterministic: the
// same inputs give bitwise the same C, which the reproducibility of training
// rests on. Mismatched shapes are an input error that prints all three.
template <class Scalar>
void gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
          const tensor::Matrix<Scalar>& C, GemmPath path = GemmPath::vendor);

// What a Linear does to its products' columns besides the product: add the
// bias to every row of Y = X W, or sum dY's columns into the bias gradient
// beside dW += X^T dY, whose columns are dY's. Empty views skip a part.
template <class Scalar>
struct ColumnEpilogue {
  tensor::ConstMatrix<Scalar> bias;    // 1 x n: C(i, j) += bias(0, j) after the product
  tensor::ConstMatrix<Scalar> summed;  // r x n: sums(0, j) += the column sum of summed, as add_column_sums takes it
  tensor::Matrix<Scalar> sums;         // 1 x n
};

// gemm, then `epilogue` on C's columns. The host GEMM runs it on each slice
// of columns in the thread that computed the slice, while it is in that
// thread's cache and without a parallel region of its own (a region costs
// about what a small microbatch's bias add does); other paths run it after
// the product as apply_epilogue does. Every entry is the one add_row and
// add_column_sums compute: results do not depend on the path or the threads.
template <class Scalar>
void gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
          const tensor::Matrix<Scalar>& C, const ColumnEpilogue<tensor::identity_t<Scalar>>& epilogue,
          GemmPath path = GemmPath::vendor);

// `epilogue` on C as kernels of their own: add_row, then add_column_sums.
// For products that have no fused epilogue (gemm_mixed).
template <class Scalar>
void apply_epilogue(const tensor::ExecutionSpace& space, const ColumnEpilogue<tensor::identity_t<Scalar>>& epilogue,
                    const tensor::Matrix<Scalar>& C);

// compute.precision = bf16 or fp16: C = alpha op(A) op(B) + beta C with A and
// B in bfloat16 or float16 and C in float32. Every product of two bfloat16 (8
// significant bits) or two float16 (11) is exact in float32 and the sums run
// in float32, so the result differs from a float64 product of the same
// operands only by the float32 summation error. The vendor path is oneDNN's
// matmul of that type where the build has oneDNN and it has a kernel for this
// CPU (mixed_gemm_library() says which), and otherwise A and B widened to
// float32 for the vendor GEMM; on CUDA it is cublasGemmEx with float32 sums.
// The portable path is the portable kernel loading the operands into float32
// tiles.
// GemmPath::packed runs the vendor path. Deterministic like gemm.
void gemm_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                const tensor::ConstMatrix<tensor::BFloat16>& A, const tensor::ConstMatrix<tensor::BFloat16>& B,
                float beta, const tensor::Matrix<float>& C, GemmPath path = GemmPath::vendor);
void gemm_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                const tensor::ConstMatrix<tensor::Half>& A, const tensor::ConstMatrix<tensor::Half>& B, float beta,
                const tensor::Matrix<float>& C, GemmPath path = GemmPath::vendor);

// What gemm_mixed's vendor path runs for operands of `operands` (bfloat16 or
// float16) in this build on this CPU, for the run log: "oneDNN 2.6.3 matmul,
// brg:avx512_core_amx_bf16 (AMX-BF16 tiles)", or "emulated in float32: ..."
// saying why.
std::string mixed_gemm_library(tensor::DType operands);

// Runs one small product on `path` in float32 (through the packed backend
// too for GemmPath::packed), one of strided blocks as attention multiplies
// them, and one in the reduced type of `precision`, so that the GEMM
// libraries' code, JIT kernels and one-time state are resident before the
// memory estimate takes its baseline (oneDNN's brgemm, its JIT sgemm for
// strided blocks and libxsmm's each cost megabytes on first use).
void load_gemm_library(const tensor::ExecutionSpace& space, GemmPath path, Precision precision);

// `count` matrices of one shape: X(i, r, c) is row r, column c of matrix i.
// Rows are contiguous (stride(2) == 1); rows and matrices may lie any
// distance apart (stride(1), stride(0)), as BLAS's leading dimension and
// batch stride allow.
template <class Scalar>
using Batch = Kokkos::View<Scalar***, Kokkos::LayoutStride, tensor::MemorySpace>;
template <class Scalar>
using ConstBatch = Batch<const Scalar>;

// X's rows cut into `count` equal blocks, columns [first, first + cols) of
// each, without a copy: a stack's blocks (first 0, every column), or one
// attention head of every sequence of a position-major projection. Scalar may
// be const. An input error unless the blocks lie inside X.
template <class Scalar>
Batch<Scalar> row_blocks(const tensor::Matrix<Scalar>& X, int count, int first, int cols);

// `batch` independent GEMMs on stacked operands: A, B and C hold `batch`
// equal blocks one below the other (A is (batch·rows) x cols of op(A)'s
// source, and so on), and block i of C = alpha op(A_i) op(B_i) + beta C_i.
// Vendor path: a CBLAS loop or cublas<T>gemmStridedBatched; portable: the
// same TeamPolicy kernel over a batch index.
template <class Scalar>
void gemm_batched(const tensor::ExecutionSpace& space, int batch, Trans trans_a, Trans trans_b,
                  tensor::identity_t<Scalar> alpha, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
                  const tensor::Matrix<Scalar>& C, GemmPath path = GemmPath::vendor);

// The same on batches of any layout: matrix i of C = alpha op(A_i) op(B_i) +
// beta C_i for the C.extent(0) matrices. C's matrices must not overlap.
template <class Scalar>
void gemm_batched(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
                  const ConstBatch<tensor::identity_t<Scalar>>& A, const ConstBatch<tensor::identity_t<Scalar>>& B,
                  tensor::identity_t<Scalar> beta, const Batch<Scalar>& C, GemmPath path = GemmPath::vendor);

// gemm_mixed on batches: matrix i of C = alpha op(A_i) op(B_i) + beta C_i
// with A and B in bfloat16 or float16 and C and its sums in float32 (the
// gemm path of attention under compute.precision = bf16, fp16). The vendor
// path is one oneDNN matmul over the batch where oneDNN has a kernel for the
// type, else each matrix in ascending order widened to float32 for the
// vendor GEMM, and one cublasGemmStridedBatchedEx call on CUDA; the portable
// path is gemm_batched's kernel loading the operands into float32 tiles.
void gemm_batched_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                        const ConstBatch<tensor::BFloat16>& A, const ConstBatch<tensor::BFloat16>& B, float beta,
                        const Batch<float>& C, GemmPath path = GemmPath::vendor);
void gemm_batched_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                        const ConstBatch<tensor::Half>& A, const ConstBatch<tensor::Half>& B, float beta,
                        const Batch<float>& C, GemmPath path = GemmPath::vendor);

}  // namespace kpipe::kernels
