// The CUDA vendor path. cuBLAS is column-major, so the row-major product
// C = op(A) op(B) is computed as its transpose C^T = op(B)^T op(A)^T, which is
// the same memory read column-major: operands swap, transposition flags stay.
#include <cublas_v2.h>
#include <fmt/format.h>

#include <type_traits>

#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::kernels::detail {

namespace {

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw runtime_error(
        fmt::format("{} failed with cuBLAS status {}; check the GPU and its memory", call, static_cast<int>(status)));
  }
}

// One handle per process, created on first use and destroyed before Kokkos
// shuts CUDA down.
cublasHandle_t handle() {
  static cublasHandle_t shared = [] {
    cublasHandle_t created = nullptr;
    check(cublasCreate(&created), "cublasCreate");
    Kokkos::push_finalize_hook([created] { cublasDestroy(created); });
    return created;
  }();
  return shared;
}

cublasOperation_t cublas_trans(Trans trans) { return trans == Trans::no ? CUBLAS_OP_N : CUBLAS_OP_T; }

}  // namespace

template <class Scalar>
void cublas_gemm(const tensor::ExecutionSpace& space, const GemmOperands<Scalar>& op) {
  const cublasHandle_t h = handle();
  check(cublasSetStream(h, space.cuda_stream()), "cublasSetStream");
  const auto ta = cublas_trans(op.trans_a);
  const auto tb = cublas_trans(op.trans_b);
  if constexpr (std::is_same_v<Scalar, float>) {
    check(cublasSgemm(h, tb, ta, op.n, op.m, op.k, &op.alpha, op.b, op.ldb, op.a, op.lda, &op.beta, op.c, op.ldc),
          "cublasSgemm");
  } else {
    check(cublasDgemm(h, tb, ta, op.n, op.m, op.k, &op.alpha, op.b, op.ldb, op.a, op.lda, &op.beta, op.c, op.ldc),
          "cublasDgemm");
  }
}

// One strided-batched call; the column-major swap of cublas_gemm applies per block.
template <class Scalar>
void cublas_gemm_batched(const tensor::ExecutionSpace& space, const BatchedGemmOperands<Scalar>& batched) {
  const cublasHandle_t h = handle();
  check(cublasSetStream(h, space.cuda_stream()), "cublasSetStream");
  const GemmOperands<Scalar>& op = batched.first;
  const auto ta = cublas_trans(op.trans_a);
  const auto tb = cublas_trans(op.trans_b);
  if constexpr (std::is_same_v<Scalar, float>) {
    check(cublasSgemmStridedBatched(h, tb, ta, op.n, op.m, op.k, &op.alpha, op.b, op.ldb, batched.stride_b, op.a,
                                    op.lda, batched.stride_a, &op.beta, op.c, op.ldc, batched.stride_c, batched.batch),
          "cublasSgemmStridedBatched");
  } else {
    check(cublasDgemmStridedBatched(h, tb, ta, op.n, op.m, op.k, &op.alpha, op.b, op.ldb, batched.stride_b, op.a,
                                    op.lda, batched.stride_a, &op.beta, op.c, op.ldc, batched.stride_c, batched.batch),
          "cublasDgemmStridedBatched");
  }
}

namespace {

// cuBLAS' name for the bits tensor::BFloat16 and tensor::Half hold.
template <class In>
constexpr cudaDataType_t cuda_type() {
  return std::is_same_v<In, tensor::BFloat16> ? CUDA_R_16BF : CUDA_R_16F;
}

}  // namespace

template <class In>
void cublas_gemm_mixed(const tensor::ExecutionSpace& space, const GemmOperands<float, In>& op) {
  const cublasHandle_t h = handle();
  check(cublasSetStream(h, space.cuda_stream()), "cublasSetStream");
  check(cublasGemmEx(h, cublas_trans(op.trans_b), cublas_trans(op.trans_a), op.n, op.m, op.k, &op.alpha, op.b,
                     cuda_type<In>(), op.ldb, op.a, cuda_type<In>(), op.lda, &op.beta, op.c, CUDA_R_32F, op.ldc,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

template <class In>
void cublas_gemm_batched_mixed(const tensor::ExecutionSpace& space, const BatchedGemmOperands<float, In>& batched) {
  const cublasHandle_t h = handle();
  check(cublasSetStream(h, space.cuda_stream()), "cublasSetStream");
  const GemmOperands<float, In>& op = batched.first;
  check(cublasGemmStridedBatchedEx(h, cublas_trans(op.trans_b), cublas_trans(op.trans_a), op.n, op.m, op.k, &op.alpha,
                                   op.b, cuda_type<In>(), op.ldb, batched.stride_b, op.a, cuda_type<In>(), op.lda,
                                   batched.stride_a, &op.beta, op.c, CUDA_R_32F, op.ldc, batched.stride_c,
                                   batched.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

std::string cublas_version() {
  int major = 0;
  int minor = 0;
  int patch = 0;
  check(cublasGetProperty(MAJOR_VERSION, &major), "cublasGetProperty");
  check(cublasGetProperty(MINOR_VERSION, &minor), "cublasGetProperty");
  check(cublasGetProperty(PATCH_LEVEL, &patch), "cublasGetProperty");
  return fmt::format("cuBLAS {}.{}.{}", major, minor, patch);
}

template void cublas_gemm<float>(const tensor::ExecutionSpace&, const GemmOperands<float>&);
template void cublas_gemm<double>(const tensor::ExecutionSpace&, const GemmOperands<double>&);
template void cublas_gemm_batched<float>(const tensor::ExecutionSpace&, const BatchedGemmOperands<float>&);
template void cublas_gemm_batched<double>(const tensor::ExecutionSpace&, const BatchedGemmOperands<double>&);
template void cublas_gemm_mixed<tensor::BFloat16>(const tensor::ExecutionSpace&,
                                                  const GemmOperands<float, tensor::BFloat16>&);
template void cublas_gemm_mixed<tensor::Half>(const tensor::ExecutionSpace&, const GemmOperands<float, tensor::Half>&);
template void cublas_gemm_batched_mixed<tensor::BFloat16>(const tensor::ExecutionSpace&,
                                                          const BatchedGemmOperands<float, tensor::BFloat16>&);
template void cublas_gemm_batched_mixed<tensor::Half>(const tensor::ExecutionSpace&,
                                                      const BatchedGemmOperands<float, tensor::Half>&);

}  // namespace kpipe::kernels::detail
