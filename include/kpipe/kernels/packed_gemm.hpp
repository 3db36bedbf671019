#pragma once
// compute.gemm = "packed" (issue #12): a Linear's weight W, and for the input
// gradient its transpose Wᵀ, are reordered into the GEMM library's preferred
// blocked layout once after every change and reused by the products of all
// microbatches of a step, instead of being re-read in row-major order by every
// call. The backend is oneDNN's matmul with the weights' layout left to the
// library (format_tag::any) and the forward's bias fused into the call. The
// weight gradient Xᵀ dY has no operand to pack but runs on the same library's
// GEMM, which beats OpenBLAS on it. Builds without oneDNN, CUDA builds and
// double precision (oneDNN's CPU matmul is float) run the vendor GEMM and add
// the bias instead, so "packed" is always a valid choice. On CPUs where
// oneDNN keeps the weights row-major (2.6 blocks them for AVX-512 only, and
// its plain matmul is slower than the vendor GEMM) the backend is libxsmm's
// JIT kernels on weights packed into panels by kpipe, where the build has
// libxsmm, and the vendor GEMM otherwise.

#include <memory>
#include <string>

#include "kpipe/kernels/gemm.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels {

namespace detail {
template <class Scalar>
class PackedBackend;
}  // namespace detail

// True where GemmPath::packed has its own backend for Scalar in this build.
template <class Scalar>
bool packed_gemm_available();

// What GemmPath::packed runs in this build, for the run log: "oneDNN 2.6.3
// matmul on blocked weights, and on the row-major operands for the weight
// gradient", "libxsmm
// kernels on weights packed in panels of 32 columns, …" or "the vendor path
// (cblas), as this build has neither oneDNN nor libxsmm".
std::string packed_gemm_library();

// The packed copies of one weight matrix. They follow W only through
// invalidate(): the owner must call it whenever W's values change (the layer
// hook Layer::weights_changed does). Not safe for concurrent use: kpipe runs
// one thread per rank.
template <class Scalar>
class PackedWeight {
 public:
  PackedWeight();
  ~PackedWeight();
  PackedWeight(PackedWeight&&) noexcept;
  PackedWeight& operator=(PackedWeight&&) noexcept;

  // Marks every packed copy stale; the next product by W (or Wᵀ) repacks it.
  // Cheap: calling it more often than W changes costs nothing but the repacks.
  void invalidate();

  // Y = X W + bias with X m x k, W k x n and bias a 1 x n row, from W's packed
  // copy (made first when stale or when a new m needs another layout).
  // Deterministic: the same X, W and bias give bitwise the same Y. Shapes that
  // do not fit are an input error that prints all four.
  void linear_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                      const tensor::ConstMatrix<Scalar>& W, const tensor::ConstMatrix<Scalar>& bias,
                      const tensor::Matrix<Scalar>& Y) const;

  // dX = dY Wᵀ with dY m x n and W k x n (the Linear's input gradient), from
  // Wᵀ's packed copy, made on first use after invalidate() (or for a new m).
  // Deterministic like linear_forward; shapes that do not fit print all three.
  void input_gradient(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& dY,
                      const tensor::ConstMatrix<Scalar>& W, const tensor::Matrix<Scalar>& dX) const;

  // compute.precision = bf16: the same two products on bfloat16 X (or dY) and
  // W (the Linear's rounded copy of its master weight) with float32 sums, bias
  // and output, from W's copy packed in bfloat16 where the backend packs
  // bfloat16 (oneDNN) and gemm_mixed on the vendor path otherwise. No
  // backend packs float16: compute.precision = fp16 runs the vendor path.
  void linear_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& X,
                      const tensor::ConstMatrix<tensor::BFloat16>& W, const tensor::ConstMatrix<float>& bias,
                      const tensor::Matrix<float>& Y) const;
  void input_gradient(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::BFloat16>& dY,
                      const tensor::ConstMatrix<tensor::BFloat16>& W, const tensor::Matrix<float>& dX) const;

  // dW += Xᵀ dY with X m x k, dY m x n and dW k x n (the Linear's weight
  // gradient, accumulating microbatches). Nothing is packed: X and dY are new
  // on every call. Deterministic like linear_forward; shapes that do not fit
  // print all three.
  void weight_gradient(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                       const tensor::ConstMatrix<Scalar>& dY, const tensor::Matrix<Scalar>& dW) const;

 private:
  // C = A op(W) (+ bias unless null), shapes checked; A and W hold In
  // (Scalar, or bfloat16 with a float C).
  template <class In, class Out>
  void product(const tensor::ExecutionSpace& space, Trans trans_w, const tensor::ConstMatrix<In>& A,
               const tensor::ConstMatrix<In>& W, const tensor::ConstMatrix<Out>* bias,
               const tensor::Matrix<Out>& C) const;

  std::unique_ptr<detail::PackedBackend<Scalar>> backend_;  // null: the vendor GEMM and a bias kernel
};

}  // namespace kpipe::kernels
