#include "kpipe/kernels/gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::kernels {

namespace {

enum class Vendor { none, cblas, cublas };

// Which vendor BLAS can read the default memory space, decided at compile time.
constexpr Vendor default_vendor() {
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same_v<tensor::ExecutionSpace, Kokkos::Cuda>) return Vendor::cublas;
#endif
#if defined(KPIPE_HAVE_CBLAS)
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible) return Vendor::cblas;
#endif
  return Vendor::none;
}

// Rows and columns of op(X).
template <class View>
std::pair<std::size_t, std::size_t> op_shape(const View& x, Trans trans) {
  return trans == Trans::no ? std::pair{x.extent(0), x.extent(1)} : std::pair{x.extent(1), x.extent(0)};
}

std::string op_name(const char* name, Trans trans) { return trans == Trans::no ? name : std::string(name) + "^T"; }

// BLAS wants a leading dimension >= 1 even for empty matrices.
template <class View>
int leading_dimension(const View& x) {
  return std::max(1, static_cast<int>(x.stride(0)));
}

template <class Scalar>
detail::GemmOperands<Scalar> operands(Trans trans_a, Trans trans_b, Scalar alpha, const tensor::ConstMatrix<Scalar>& A,
                                      const tensor::ConstMatrix<Scalar>& B, Scalar beta,
                                      const tensor::Matrix<Scalar>& C) {
  const int m = static_cast<int>(C.extent(0));
  const int n = static_cast<int>(C.extent(1));
  const int k = static_cast<int>(op_shape(A, trans_a).second);
  return {trans_a,
          trans_b,
          m,
          n,
          k,
          alpha,
          A.data(),
          leading_dimension(A),
          B.data(),
          leading_dimension(B),
          beta,
          C.data(),
          leading_dimension(C)};
}

}  // namespace

GemmPath parse_gemm_path(std::string_view name) {
  if (name == "vendor") return GemmPath::vendor;
  if (name == "portable") return GemmPath::portable;
  throw input_error(fmt::format("compute.gemm = \"{}\" is not a GEMM path; use \"vendor\" or \"portable\"", name));
}

std::string vendor_gemm_library() {
  switch (default_vendor()) {
    case Vendor::cblas:
      return "cblas";
    case Vendor::cublas:
      return "cublas";
    case Vendor::none:
      break;
  }
  return "portable";
}

template <class Scalar>
void gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
          const tensor::Matrix<Scalar>& C, GemmPath path) {
  const auto [m, k] = op_shape(A, trans_a);
  const auto [k_b, n] = op_shape(B, trans_b);
  if (k_b != k || C.extent(0) != m || C.extent(1) != n) {
    throw input_error(fmt::format("gemm shapes do not fit: {} is {}x{}, {} is {}x{}, C is {}", op_name("A", trans_a), m,
                                  k, op_name("B", trans_b), k_b, n, tensor::shape_string(C)));
  }
  if (m == 0 || n == 0) return;
  constexpr Vendor vendor = default_vendor();
  if (vendor == Vendor::none || path == GemmPath::portable) {
    detail::portable_gemm<Scalar>(space, trans_a, trans_b, alpha, A, B, beta, C);
    return;
  }
  if constexpr (vendor == Vendor::cublas) {
    detail::cublas_gemm<Scalar>(space, operands(trans_a, trans_b, alpha, A, B, beta, C));
  } else if constexpr (vendor == Vendor::cblas) {
    // CBLAS runs on the calling thread: earlier kernels must have finished.
    space.fence();
    detail::cblas_gemm<Scalar>(operands(trans_a, trans_b, alpha, A, B, beta, C));
  }
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                     \
  template void gemm<Scalar>(const tensor::ExecutionSpace&, Trans, Trans, Scalar, const tensor::ConstMatrix<Scalar>&, \
                             const tensor::ConstMatrix<Scalar>&, Scalar, const tensor::Matrix<Scalar>&, GemmPath);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
