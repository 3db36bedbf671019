#include "kpipe/kernels/swiglu.hpp"

#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"
#include "stored.hpp"

// A row at a time (rows.hpp): the gate and up halves of a row are read once.

namespace kpipe::kernels {

namespace {

template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar sigmoid(Scalar a) {
  return Scalar(1) / (Scalar(1) + tensor::compat::math::exp(-a));
}

}  // namespace

template <class Scalar>
void swiglu_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                    const tensor::Matrix<Scalar>& Y) {
  const int rows = static_cast<int>(X.extent(0));
  const int n = static_cast<int>(Y.extent(1));
  tensor::require_shape("SwiGLU input", X, rows, 2 * n);
  tensor::require_shape("SwiGLU output", Y, rows, n);
  detail::for_each_row(
      space, "kpipe::kernels::swiglu_forward", rows, KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const Scalar* const x = &X(r, 0);
        Scalar* const y = &Y(r, 0);
        detail::row_for(row, n, [&](int j) { y[j] = x[j] * sigmoid(x[j]) * x[n + j]; });
      });
}

template <class Scalar, class Stored>
void swiglu_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Stored>>& X,
                     const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dX) {
  const int rows = static_cast<int>(X.extent(0));
  const int n = static_cast<int>(dY.extent(1));
  tensor::require_shape("SwiGLU saved input", X, rows, 2 * n);
  tensor::require_shape("SwiGLU input gradient", dX, rows, 2 * n);
  detail::for_each_row(
      space, "kpipe::kernels::swiglu_backward", rows, KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const Stored* const x = &X(r, 0);
        const Scalar* const dy = &dY(r, 0);
        Scalar* const dx = &dX(r, 0);
        detail::row_for(row, n, [&](int j) {
          const Scalar a = detail::load(x[j]), b = detail::load(x[n + j]), s = sigmoid(a);
          dx[j] = dy[j] * b * (s + a * s * (Scalar(1) - s));
          dx[n + j] = dy[j] * a * s;
        });
      });
}

template void swiglu_forward<float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&,
                                    const tensor::Matrix<float>&);
template void swiglu_forward<double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&,
                                     const tensor::Matrix<double>&);
template void swiglu_backward<float, float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&,
                                            const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);
template void swiglu_backward<double, double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&,
                                              const tensor::ConstMatrix<double>&, const tensor::Matrix<double>&);
// compute.precision = bf16 and fp16: the saved input in that type.
template void swiglu_backward<float, tensor::BFloat16>(const tensor::ExecutionSpace&,
                                                       const tensor::ConstMatrix<tensor::BFloat16>&,
                                                       const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);
template void swiglu_backward<float, tensor::Half>(const tensor::ExecutionSpace&,
                                                   const tensor::ConstMatrix<tensor::Half>&,
                                                   const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);

}  // namespace kpipe::kernels
