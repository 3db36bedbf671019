// PackedWeight: checks shapes and hands the product by W or Wᵀ, and the
// weight gradient, to the packed backend where this build has one for the
// scalar type and memory space, else to the vendor GEMM (and the bias
// kernel), which is what a Linear does without it.
#include <fmt/format.h>

#include <string>
#include <type_traits>

#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/packed_gemm.hpp"

namespace kpipe::kernels {

namespace {

// What backs GemmPath::packed for float on this build and CPU: oneDNN where it
// blocks the weights (AVX-512 and newer), else libxsmm's kernels (AVX2), else
// nothing, and the vendor path runs.
enum class PackedLibrary { none, onednn, libxsmm };

constexpr bool host_accessible = Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible;

PackedLibrary packed_library() {
  if (!host_accessible) return PackedLibrary::none;
#if defined(KPIPE_HAVE_DNNL)
  if (detail::onednn_blocks_weights()) return PackedLibrary::onednn;
#endif
#if defined(KPIPE_HAVE_LIBXSMM)
  if (detail::libxsmm_available()) return PackedLibrary::libxsmm;
#endif
  return PackedLibrary::none;
}

// Why the vendor path runs: what this build has and why each declines.
std::string vendor_reason() {
  if (!host_accessible) return fmt::format("as no packed backend can read {}", tensor::MemorySpace::name());
  std::string declined;
#if defined(KPIPE_HAVE_DNNL)
  declined = detail::onednn_version() + " has no blocked-weights matmul for this CPU";
#endif
#if defined(KPIPE_HAVE_LIBXSMM)
  declined += std::string(declined.empty() ? "" : " and ") + "libxsmm has no kernels for it";
#endif
  return declined.empty() ? "as this build has neither oneDNN nor libxsmm" : "as " + declined;
}

}  // namespace

template <class Scalar>
bool packed_gemm_available() {
  return std::is_same_v<Scalar, float> && packed_library() != PackedLibrary::none;
}

std::string packed_gemm_library() {
  const PackedLibrary library = packed_library();
#if defined(KPIPE_HAVE_DNNL)
  if (library == PackedLibrary::onednn) {
    return detail::onednn_version() +
           " matmul on blocked weights, and on the row-major operands for the weight gradient";
  }
#endif
  if (library == PackedLibrary::libxsmm) {
    return fmt::format(
        "libxsmm kernels on weights packed in panels of {} columns, the vendor path ({}) for the "
        "weight gradient (float)",
        detail::libxsmm_panel_width, vendor_gemm_library());
  }
  return fmt::format("the vendor path ({}), {}", vendor_gemm_library(), vendor_reason());
}

template <class Scalar>
PackedWeight<Scalar>::PackedWeight() {
  if constexpr (std::is_same_v<Scalar, float>) {
    [[maybe_unused]] const PackedLibrary library = packed_library();
#if defined(KPIPE_HAVE_DNNL)
    if (library == PackedLibrary::onednn) backend_ = detail::make_onednn_packed();
#endif
#if defined(KPIPE_HAVE_LIBXSMM)
    if (library == PackedLibrary::libxsmm) backend_ = detail::make_libxsmm_packed();
#endif
  }
}

template <class Scalar>
PackedWeight<Scalar>::~PackedWeight() = default;
template <class Scalar>
PackedWeight<Scalar>::PackedWeight(PackedWeight&&) noexcept = default;
template <class Scalar>
PackedWeight<Scalar>& PackedWeight<Scalar>::operator=(PackedWeight&&) noexcept = default;

template <class Scalar>
void PackedWeight<Scalar>::invalidate() {
  if (backend_) backend_->invalidate();
}

namespace {

// X (m x k) times W (k x n) plus a 1 x n bias into Y (m x n), or an input error printing all four.
template <class XView, class WView, class BiasView, class YView>
void check_forward(const XView& X, const WView& W, const BiasView& bias, const YView& Y) {
  const std::size_t m = X.extent(0), k = X.extent(1), n = W.extent(1);
  if (W.extent(0) != k || bias.extent(0) != 1 || bias.extent(1) != n || Y.extent(0) != m || Y.extent(1) != n) {
    throw input_error(fmt::format("packed linear shapes do not fit: X is {}, W is {}, bias is {}, Y is {}",
                                  tensor::shape_string(X), tensor::shape_string(W), tensor::shape_string(bias),
                                  tensor::shape_string(Y)));
  }
}

// dY (m x n) times Wᵀ (W k x n) into dX (m x k), or an input error printing all three.
template <class DyView, class WView, class DxView>
void check_input_gradient(const DyView& dY, const WView& W, const DxView& dX) {
  const std::size_t m = dY.extent(0), n = dY.extent(1), k = W.extent(0);
  if (W.extent(1) != n || dX.extent(0) != m || dX.extent(1) != k) {
    throw input_error(fmt::format("packed input gradient shapes do not fit: dY is {}, W is {}, dX is {}",
                                  tensor::shape_string(dY), tensor::shape_string(W), tensor::shape_string(dX)));
  }
}

}  // namespace

template <class Scalar>
void PackedWeight<Scalar>::linear_forward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                                          const tensor::ConstMatrix<Scalar>& W, const tensor::ConstMatrix<Scalar>& bias,
                                          const tensor::Matrix<Scalar>& Y) const {
  check_forward(X, W, bias, Y);
  product(space, Trans::no, X, W, &bias, Y);
}

template <class Scalar>
void PackedWeight<Scalar>::input_gradient(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& dY,
                                          const tensor::ConstMatrix<Scalar>& W,
                                          const tensor::Matrix<Scalar>& dX) const {
  check_input_gradient(dY, W, dX);
  product<Scalar, Scalar>(space, Trans::yes, dY, W, nullptr, dX);
}

template <class Scalar>
void PackedWeight<Scalar>::linear_forward(const tensor::ExecutionSpace& space,
                                          const tensor::ConstMatrix<tensor::BFloat16>& X,
                                          const tensor::ConstMatrix<tensor::BFloat16>& W,
                                          const tensor::ConstMatrix<float>& bias,
                                          const tensor::Matrix<float>& Y) const {
  check_forward(X, W, bias, Y);
  product(space, Trans::no, X, W, &bias, Y);
}

template <class Scalar>
void PackedWeight<Scalar>::input_gradient(const tensor::ExecutionSpace& space,
                                          const tensor::ConstMatrix<tensor::BFloat16>& dY,
                                          const tensor::ConstMatrix<tensor::BFloat16>& W,
                                          const tensor::Matrix<float>& dX) const {
  check_input_gradient(dY, W, dX);
  product<tensor::BFloat16, float>(space, Trans::yes, dY, W, nullptr, dX);
}

template <class Scalar>
void PackedWeight<Scalar>::weight_gradient(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                                           const tensor::ConstMatrix<Scalar>& dY,
                                           const tensor::Matrix<Scalar>& dW) const {
  const std::size_t m = X.extent(0), k = X.extent(1), n = dY.extent(1);
  if (dY.extent(0) != m || dW.extent(0) != k || dW.extent(1) != n) {
    throw input_error(fmt::format("packed weight gradient shapes do not fit: X is {}, dY is {}, dW is {}",
                                  tensor::shape_string(X), tensor::shape_string(dY), tensor::shape_string(dW)));
  }
  if (!backend_) {
    gemm(space, Trans::yes, Trans::no, 1, X, dY, 1, dW, GemmPath::vendor);
    return;
  }
  // An empty product leaves dW as it is (beta = 1).
  if (m == 0 || k == 0 || n == 0) return;
  space.fence();
  backend_->gemm({Trans::yes, Trans::no, static_cast<int>(k), static_cast<int>(n), static_cast<int>(m), 1, X.data(),
                  static_cast<int>(X.stride(0)), dY.data(), static_cast<int>(dY.stride(0)), 1, dW.data(),
                  static_cast<int>(dW.stride(0))});
}

template <class Scalar>
template <class In, class Out>
void PackedWeight<Scalar>::product(const tensor::ExecutionSpace& space, Trans trans_w, const tensor::ConstMatrix<In>& A,
                                   const tensor::ConstMatrix<In>& W, const tensor::ConstMatrix<Out>* bias,
                                   const tensor::Matrix<Out>& C) const {
  constexpr bool bf16 = std::is_same_v<In, tensor::BFloat16>;
  const auto m = static_cast<int>(C.extent(0)), n = static_cast<int>(C.extent(1)), k = static_cast<int>(A.extent(1));
  const detail::GemmOperands<Out, In> op{Trans::no,
                                         trans_w,
                                         m,
                                         n,
                                         k,
                                         1,
                                         A.data(),
                                         static_cast<int>(A.stride(0)),
                                         W.data(),
                                         static_cast<int>(W.stride(0)),
                                         0,
                                         C.data(),
                                         static_cast<int>(C.stride(0))};
  if (backend_ && m > 0 && n > 0) {
    // The backend runs on the calling thread: earlier kernels must have finished.
    space.fence();
    const Out* bias_row = bias ? bias->data() : nullptr;
    if constexpr (!bf16) {
      return backend_->product(op, bias_row);
    } else if constexpr (std::is_same_v<Scalar, float>) {
      if (backend_->product_bf16(op, bias_row)) return;  // false: this backend packs float32 only
    }
  }
  if constexpr (bf16) {
    gemm_mixed(space, Trans::no, trans_w, 1, A, W, 0, C, GemmPath::vendor);
  } else {
    gemm(space, Trans::no, trans_w, 1, A, W, 0, C, GemmPath::vendor);
  }
  if (bias) add_row(space, *bias, C);
}

template bool packed_gemm_available<float>();
template bool packed_gemm_available<double>();
template class PackedWeight<float>;
template class PackedWeight<double>;

}  // namespace kpipe::kernels
