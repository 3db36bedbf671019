#include "kpipe/kernels/gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../columns.hpp"
#include "../host_loops.hpp"
#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::kernels {

int detail::host_threads() { return tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace()); }

// Columns of C below which a slice is not worth a thread of its own.
constexpr int min_columns_per_thread = 64;

int detail::column_parts(int n) { return std::clamp(n / min_columns_per_thread, 1, host_threads()); }

int detail::onednn_threads(int n) {
#if defined(KPIPE_HAVE_DNNL)
  if (onednn_shares_host_threads() && !tensor::compat::in_host_parallel_region()) return column_parts(n);
#endif
  return 1;
}

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

// Rows and columns of op(X) for X of rows x cols.
std::pair<std::size_t, std::size_t> op_shape(std::size_t rows, std::size_t cols, Trans trans) {
  return trans == Trans::no ? std::pair{rows, cols} : std::pair{cols, rows};
}
template <class View>
std::pair<std::size_t, std::size_t> op_shape(const View& x, Trans trans) {
  return op_shape(x.extent(0), x.extent(1), trans);
}

std::string op_name(const char* name, Trans trans) { return trans == Trans::no ? name : std::string(name) + "^T"; }

// BLAS wants a leading dimension >= 1 even for empty matrices: the distance
// between rows, which are dimension rank - 2 of a matrix or a batch.
template <class View>
int leading_dimension(const View& x) {
  return std::max(1, static_cast<int>(x.stride(static_cast<int>(View::rank) - 2)));
}

// m, n, k: the shape of one product (of one block, for gemm_batched).
template <class Scalar, class AView, class BView, class CView,
          class In = std::remove_const_t<typename AView::value_type>>
detail::GemmOperands<Scalar, In> operands(Trans trans_a, Trans trans_b, std::size_t m, std::size_t n, std::size_t k,
                                          Scalar alpha, const AView& A, const BView& B, Scalar beta, const CView& C) {
  return {trans_a,
          trans_b,
          static_cast<int>(m),
          static_cast<int>(n),
          static_cast<int>(k),
          alpha,
          A.data(),
          leading_dimension(A),
          B.data(),
          leading_dimension(B),
          beta,
          C.data(),
          leading_dimension(C)};
}

// Host float32 GEMMs go to oneDNN's matmul where its JIT kernels use wider
// vectors than the kernel OpenBLAS picked for this CPU: on Sapphire Rapids,
// where OpenBLAS 0.3.21 runs Prescott's SSE3 code, and on AMD Zen 4, where it
// runs Haswell's AVX2 code and oneDNN AVX-512. Where both run AVX-512 oneDNN
// still wins at a microbatch's rows over OpenBLAS' Cooperlake kernel (they
// tie at 1,024 rows), but only on whole products: a thread's slice of columns
// (op(B) with a leading dimension past its width) gets oneDNN 2.6's gemm:jit,
// not its brgemm, and two threads ran the quickstart slower than on OpenBLAS.
// So the tie goes to oneDNN where the rank has one host thread, or where its
// threads are oneDNN's too and host_gemm hands it whole products. Where both
// run AVX2, OpenBLAS' Haswell kernel beats oneDNN's at those rows
// (docs/performance.md, "AMD EPYC, Zen 4, a second host" and the other CPUs).
#if defined(KPIPE_HAVE_DNNL) && defined(KPIPE_HAVE_CBLAS)
bool float_gemm_on_onednn() {
  static const bool on_onednn = [] {
    const detail::VectorIsa blas = detail::cblas_vector_isa(), onednn = detail::onednn_vector_isa();
    const bool whole_products = detail::host_threads() == 1 || detail::onednn_shares_host_threads();
    return blas != detail::VectorIsa::unknown &&
           (onednn > blas || (onednn == blas && onednn == detail::VectorIsa::avx512 && whole_products));
  }();
  return on_onednn;
}

// Whether host_gemm hands a float32 product whole to oneDNN on the rank's
// OpenMP threads rather than splitting its columns.
bool float_gemm_on_onednn_threads() { return float_gemm_on_onednn() && detail::onednn_shares_host_threads(); }
#endif

// One library call on the calling thread: CBLAS, or oneDNN for float32 where
// float_gemm_on_onednn().
template <class Scalar>
void library_gemm(const detail::GemmOperands<Scalar>& op) {
#if defined(KPIPE_HAVE_DNNL) && defined(KPIPE_HAVE_CBLAS)
  if constexpr (std::is_same_v<Scalar, float>) {
    if (float_gemm_on_onednn()) return detail::onednn_gemm(op);
  }
#endif
  detail::cblas_gemm(op);
}

using Host = Kokkos::DefaultHostExecutionSpace;

// One host GEMM. In a threaded host build (OpenMP) a product splits its
// output columns over Kokkos' threads, each a single-threaded library call on
// its slice: the GEMMs run in the rank's one threading runtime, no library
// pool spins beside Kokkos' threads, and each thread packs only its slice of
// op(B). OpenBLAS' own threading of the Linear's 32-row products split their
// rows and packed all of op(B) in each thread, and gained far less from a
// second thread than a split by columns does (docs/performance-log.md,
// "Portability study").
// Every output is one slice's, summed over k in the library's order: the
// result does not depend on the thread count. Float32 products that run on
// oneDNN whose OpenMP threads are Kokkos' own go to it whole instead, on as
// many threads as there would be slices: its brgemm kernels, which a slice
// does not get (a float32 result may then depend on the thread count).
// A float32 weight gradient over a microbatch's rows whose gradient is at
// least a core's L2 streams through kpipe's kernel instead, whole or in the
// same column slices, where the CPU has AVX-512: it outruns oneDNN when the
// gradients come from memory, not when they sit in L2, where the smaller
// gradients stay on the library (docs/performance.md, "AMD EPYC, Zen 5").
// `then(first, last)` runs after the product of C's columns [first, last),
// in the thread that computed them (the calling thread, for a whole product).
template <class Scalar, class Then = void (*)(int, int)>
void host_gemm(
    const detail::GemmOperands<Scalar>& op, const Then& then = [](int, int) {}) {
  bool streamed = false;
  if constexpr (std::is_same_v<Scalar, float>) streamed = detail::streamed_weight_gradient(op);
  const auto product = [streamed](const detail::GemmOperands<Scalar>& part) {
    if constexpr (std::is_same_v<Scalar, float>) {
      if (streamed) return detail::stream_weight_gradient(part);
    }
    library_gemm(part);
  };
  const int parts = detail::column_parts(op.n);
  if (parts == 1 || tensor::compat::in_host_parallel_region()) {
    product(op);
    then(0, op.n);
    return;
  }
#if defined(KPIPE_HAVE_DNNL) && defined(KPIPE_HAVE_CBLAS)
  if constexpr (std::is_same_v<Scalar, float>) {
    if (!streamed && float_gemm_on_onednn_threads()) {
      detail::onednn_gemm(op, parts);
      then(0, op.n);
      return;
    }
  }
#endif
  // Slice `part` of C's columns and of op(B)'s: columns of B (row-major k x
  // n), or rows of B when it is transposed (n x k).
  const auto slice = [&op, &then, &product, parts](int part) {
    const int first = static_cast<int>(static_cast<long long>(op.n) * part / parts);
    const int last = static_cast<int>(static_cast<long long>(op.n) * (part + 1) / parts);
    detail::GemmOperands<Scalar> columns = op;
    columns.n = last - first;
    columns.b = op.b + (op.trans_b == Trans::no ? first : static_cast<std::ptrdiff_t>(first) * op.ldb);
    columns.c = op.c + first;
    product(columns);
    then(first, last);
  };
  Kokkos::parallel_for(tensor::compat::kernel_label("kpipe::kernels::gemm_columns"),
                       Kokkos::RangePolicy<Host>(0, parts), slice);
  tensor::compat::fence(Host(), "kpipe::kernels::gemm_columns");
}

// The epilogue on columns [first, last) of C on the calling host thread, each
// entry as add_row and add_column_sums compute it.
template <class Scalar>
void host_epilogue(const ColumnEpilogue<Scalar>& epilogue, const tensor::Matrix<Scalar>& C, int first, int last) {
  if (epilogue.bias.data() != nullptr) {
    const Scalar* const bias = epilogue.bias.data();
    for (std::size_t i = 0; i < C.extent(0); ++i) {
      Scalar* const row = &C(i, 0);
      detail::host_loop([row, bias](std::int64_t j) { row[j] += bias[j]; }, first, last);
    }
  }
  if (epilogue.sums.data() != nullptr) detail::add_column_sums_on_host(epilogue.summed, epilogue.sums, first, last);
}

// CBLAS has no strided-batch call: one call per block, in ascending order.
template <class Scalar>
void host_gemm_batched(const detail::BatchedGemmOperands<Scalar>& op) {
  detail::GemmOperands<Scalar> block = op.first;
  for (int i = 0; i < op.batch; ++i) {
    block.a = op.first.a + i * op.stride_a;
    block.b = op.first.b + i * op.stride_b;
    block.c = op.first.c + i * op.stride_c;
    host_gemm(block);
  }
}

}  // namespace

BlasThreads vendor_blas_threads() {
#if defined(KPIPE_HAVE_CBLAS)
  if (default_vendor() == Vendor::cblas) return detail::cblas_threads();
#endif
  return {};
}

bool gemm_on_calling_thread(GemmPath path) { return path == GemmPath::vendor && default_vendor() == Vendor::cblas; }

std::string vendor_gemm_library() {
  std::string library;
  switch (default_vendor()) {
    case Vendor::cblas:
#if defined(KPIPE_HAVE_DNNL) && defined(KPIPE_HAVE_CBLAS)
      if (float_gemm_on_onednn()) {
        const bool narrower = detail::cblas_vector_isa() < detail::onednn_vector_isa();
        library =
            fmt::format("{} matmul for float32 and cblas for float64, as OpenBLAS runs its {} kernel on this CPU, {}",
                        detail::onednn_version(), detail::cblas_kernel(),
                        narrower ? "with narrower vectors than oneDNN's"
                                 : "slower than oneDNN's AVX-512 kernels at a microbatch's rows");
        break;
      }
#endif
#if defined(KPIPE_HAVE_CBLAS)
      library = detail::cblas_library();
#else
      library = "cblas";
#endif
      break;
    case Vendor::cublas:
#if defined(KOKKOS_ENABLE_CUDA)
      return detail::cublas_version();
#else
      return "cublas";
#endif
    case Vendor::none:
      return "portable";
  }
  if (detail::streams_weight_gradients()) library += ", " + detail::weight_gradient_streaming();
  if (const int threads = detail::host_threads(); threads > 1) {
#if defined(KPIPE_HAVE_DNNL) && defined(KPIPE_HAVE_CBLAS)
    if (default_vendor() == Vendor::cblas && float_gemm_on_onednn_threads()) {
      return library + fmt::format(
                           ", float32 products whole on the rank's {} OpenMP threads (oneDNN's are Kokkos'), "
                           "float64 output columns split over them, one library thread each",
                           threads);
    }
#endif
    library += fmt::format(", output columns split over {} Kokkos threads, one library thread each", threads);
  }
  return library;
}

template <class Scalar>
Batch<Scalar> row_blocks(const tensor::Matrix<Scalar>& X, int count, int first, int cols) {
  const std::size_t rows = X.extent(0);
  if (count < 1 || rows % static_cast<std::size_t>(count) != 0 || first < 0 || cols < 0 ||
      static_cast<std::size_t>(first) + static_cast<std::size_t>(cols) > X.extent(1)) {
    throw input_error(fmt::format("cannot cut {} into {} row blocks of columns [{}, {})", tensor::shape_string(X),
                                  count, first, first + cols));
  }
  const std::size_t block_rows = rows / static_cast<std::size_t>(count);
  const std::size_t ld = X.stride(0);
  // An empty X may have no memory to offset into.
  Scalar* const origin = X.span() == 0 ? X.data() : X.data() + first;
  return Batch<Scalar>(origin, Kokkos::LayoutStride(count, block_rows * ld, block_rows, ld, cols, 1));
}

namespace {

// op(A)'s m x k and op(B)'s k x n, checked against C's m x n: an input error
// printing all three when they do not fit.
template <class AView, class BView, class CView>
std::tuple<std::size_t, std::size_t, std::size_t> product_shape(const char* what, Trans trans_a, Trans trans_b,
                                                                const AView& A, const BView& B, const CView& C) {
  const auto [m, k] = op_shape(A, trans_a);
  const auto [k_b, n] = op_shape(B, trans_b);
  if (k_b != k || C.extent(0) != m || C.extent(1) != n) {
    throw input_error(fmt::format("{} shapes do not fit: {} is {}x{}, {} is {}x{}, C is {}", what,
                                  op_name("A", trans_a), m, k, op_name("B", trans_b), k_b, n, tensor::shape_string(C)));
  }
  return {m, n, k};
}

// A matrix as a batch of one.
template <class View>
auto whole(const View& X) {
  return row_blocks(X, 1, 0, static_cast<int>(X.extent(1)));
}

}  // namespace

template <class Scalar>
void gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
          const tensor::Matrix<Scalar>& C, GemmPath path) {
  gemm<Scalar>(space, trans_a, trans_b, alpha, A, B, beta, C, ColumnEpilogue<Scalar>{}, path);
}

template <class Scalar>
void gemm(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
          const tensor::Matrix<Scalar>& C, const ColumnEpilogue<tensor::identity_t<Scalar>>& epilogue, GemmPath path) {
  const auto [m, n, k] = product_shape("gemm", trans_a, trans_b, A, B, C);
  if (epilogue.bias.data() != nullptr) tensor::require_shape("epilogue bias", epilogue.bias, 1, n);
  if (epilogue.sums.data() != nullptr) {
    tensor::require_shape("epilogue column sums", epilogue.sums, 1, n);
    tensor::require_shape("epilogue summed matrix", epilogue.summed, epilogue.summed.extent(0), n);
  }
  if (n == 0) return;
  constexpr Vendor vendor = default_vendor();
  if (m == 0 || vendor == Vendor::none || path == GemmPath::portable) {
    if (m != 0) detail::portable_gemm<Scalar>(space, trans_a, trans_b, alpha, whole(A), whole(B), beta, whole(C));
    apply_epilogue(space, epilogue, C);
    return;
  }
  if constexpr (vendor == Vendor::cublas) {
    detail::cublas_gemm<Scalar>(space, operands(trans_a, trans_b, m, n, k, alpha, A, B, beta, C));
    apply_epilogue(space, epilogue, C);
  } else if constexpr (vendor == Vendor::cblas) {
    // CBLAS runs on the calling thread: earlier kernels must have finished.
    // Inside a host parallel region they have (the instance runs that
    // region), and its fence would wait for the region's own lock.
    if (!tensor::compat::in_host_parallel_region()) space.fence();
    const auto op = operands(trans_a, trans_b, m, n, k, alpha, A, B, beta, C);
    if (epilogue.bias.data() == nullptr && epilogue.sums.data() == nullptr) {
      host_gemm<Scalar>(op);
    } else {
      host_gemm<Scalar>(op, [&](int first, int last) { host_epilogue(epilogue, C, first, last); });
    }
  }
}

template <class Scalar>
void apply_epilogue(const tensor::ExecutionSpace& space, const ColumnEpilogue<tensor::identity_t<Scalar>>& epilogue,
                    const tensor::Matrix<Scalar>& C) {
  if (epilogue.bias.data() != nullptr) add_row(space, epilogue.bias, C);
  if (epilogue.sums.data() != nullptr) add_column_sums(space, epilogue.summed, epilogue.sums);
}

template <class Scalar>
void gemm_batched(const tensor::ExecutionSpace& space, int batch, Trans trans_a, Trans trans_b,
                  tensor::identity_t<Scalar> alpha, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
                  const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, tensor::identity_t<Scalar> beta,
                  const tensor::Matrix<Scalar>& C, GemmPath path) {
  const auto blocks = static_cast<std::size_t>(batch);
  if (batch < 1 || A.extent(0) % blocks != 0 || B.extent(0) % blocks != 0 || C.extent(0) % blocks != 0) {
    throw input_error(fmt::format("gemm_batched cannot split A ({}), B ({}) and C ({}) into {} equal row blocks",
                                  tensor::shape_string(A), tensor::shape_string(B), tensor::shape_string(C), batch));
  }
  const auto stack = [batch](const auto& X) { return row_blocks(X, batch, 0, static_cast<int>(X.extent(1))); };
  gemm_batched<Scalar>(space, trans_a, trans_b, alpha, stack(A), stack(B), beta, stack(C), path);
}

namespace {

// The batch size and m, n, k of batches A, B, C, checked: an input error
// naming `what` when they do not fit or a row is not contiguous.
template <class ABatch, class BBatch, class CBatch>
std::tuple<std::size_t, std::size_t, std::size_t, std::size_t> batched_shape(const char* what, Trans trans_a,
                                                                             Trans trans_b, const ABatch& A,
                                                                             const BBatch& B, const CBatch& C) {
  const std::size_t batch = C.extent(0);
  const auto [m, k] = op_shape(A.extent(1), A.extent(2), trans_a);
  const auto [k_b, n] = op_shape(B.extent(1), B.extent(2), trans_b);
  if (A.extent(0) != batch || B.extent(0) != batch || k_b != k || C.extent(1) != m || C.extent(2) != n) {
    throw input_error(fmt::format("{} shapes do not fit: {} blocks of {} {}x{}, {} {}x{}, C {}x{}", what, batch,
                                  op_name("A", trans_a), m, k, op_name("B", trans_b), k_b, n, C.extent(1),
                                  C.extent(2)));
  }
  if (A.stride(2) != 1 || B.stride(2) != 1 || C.stride(2) != 1) {
    throw input_error(fmt::format("{} needs contiguous rows: an entry's stride must be 1", what));
  }
  return {batch, m, n, k};
}

// The BLAS view of batches whose shape batched_shape checked.
template <class Scalar, class ABatch, class BBatch, class CBatch,
          class In = std::remove_const_t<typename ABatch::value_type>>
detail::BatchedGemmOperands<Scalar, In> batched_operands(Trans trans_a, Trans trans_b, std::size_t batch, std::size_t m,
                                                         std::size_t n, std::size_t k, Scalar alpha, const ABatch& A,
                                                         const BBatch& B, Scalar beta, const CBatch& C) {
  return {operands(trans_a, trans_b, m, n, k, alpha, A, B, beta, C), static_cast<int>(batch),
          static_cast<long long>(A.stride(0)), static_cast<long long>(B.stride(0)),
          static_cast<long long>(C.stride(0))};
}

// The stored rows x cols of op(X) = rows x cols, X of In with leading
// dimension ld, widened into `into` (dense rows): its float32 operand.
template <class In>
int widen_operand(const In* x, int ld, int rows, int cols, Trans trans, std::vector<float>& into) {
  if (trans == Trans::yes) std::swap(rows, cols);
  into.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    // A row at a time in the vector ISA's clone: the conversions vectorise.
    const In* const from = x + static_cast<std::ptrdiff_t>(r) * ld;
    float* const to = into.data() + static_cast<std::ptrdiff_t>(r) * cols;
    detail::host_loop([from, to](std::int64_t c) { to[c] = tensor::to_float(from[c]); }, 0, cols);
  }
  return std::max(1, cols);
}

// The host's mixed products: one oneDNN matmul of the type over the batch
// where oneDNN has a kernel for this CPU (on the rank's threads, where they
// are oneDNN's), else block by block in ascending
// order the operands widened to float32 for the vendor GEMM (the same
// products; only the library's sum order differs), in buffers kept between
// calls.
template <class In>
void host_gemm_batched_mixed(const detail::BatchedGemmOperands<float, In>& op) {
#if defined(KPIPE_HAVE_DNNL)
  if (!detail::onednn_kernel<In>().empty()) {
    detail::onednn_gemm_batched(op, detail::onednn_threads(op.first.n));
    return;
  }
#endif
  const detail::GemmOperands<float, In>& block = op.first;
  thread_local std::vector<float> a;
  thread_local std::vector<float> b;
  for (int i = 0; i < op.batch; ++i) {
    const int lda = widen_operand(op.first.a + i * op.stride_a, block.lda, block.m, block.k, block.trans_a, a);
    const int ldb = widen_operand(op.first.b + i * op.stride_b, block.ldb, block.k, block.n, block.trans_b, b);
    host_gemm(detail::GemmOperands<float>{block.trans_a, block.trans_b, block.m, block.n, block.k, block.alpha,
                                          a.data(), lda, b.data(), ldb, block.beta, op.first.c + i * op.stride_c,
                                          block.ldc});
  }
}

// matrix i of C = alpha op(A_i) op(B_i) + beta C_i on In operands: Scalar
// (gemm_batched), or bfloat16 and float16 with float32 sums
// (gemm_batched_mixed); `what` names the call in shape errors.
template <class Scalar, class In>
void batched_product(const char* what, const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, Scalar alpha,
                     const ConstBatch<In>& A, const ConstBatch<In>& B, Scalar beta, const Batch<Scalar>& C,
                     GemmPath path) {
  const auto [batch, m, n, k] = batched_shape(what, trans_a, trans_b, A, B, C);
  if (batch == 0 || m == 0 || n == 0) return;
  constexpr Vendor vendor = default_vendor();
  if (vendor == Vendor::none || path == GemmPath::portable) {
    detail::portable_gemm<In>(space, trans_a, trans_b, alpha, A, B, beta, C);
    return;
  }
  const auto op = batched_operands<Scalar>(trans_a, trans_b, batch, m, n, k, alpha, A, B, beta, C);
  constexpr bool mixed = !std::is_same_v<In, Scalar>;
  if constexpr (vendor == Vendor::cublas) {
    if constexpr (!mixed) {
      detail::cublas_gemm_batched<Scalar>(space, op);
    } else if (batch == 1) {
      detail::cublas_gemm_mixed(space, op.first);
    } else {
      detail::cublas_gemm_batched_mixed(space, op);
    }
  } else if constexpr (vendor == Vendor::cblas) {
    space.fence();  // oneDNN and CBLAS run on the calling thread
    if constexpr (mixed) {
      host_gemm_batched_mixed(op);
    } else {
      host_gemm_batched<Scalar>(op);
    }
  }
}

}  // namespace

template <class Scalar>
void gemm_batched(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, tensor::identity_t<Scalar> alpha,
                  const ConstBatch<tensor::identity_t<Scalar>>& A, const ConstBatch<tensor::identity_t<Scalar>>& B,
                  tensor::identity_t<Scalar> beta, const Batch<Scalar>& C, GemmPath path) {
  batched_product<Scalar, Scalar>("gemm_batched", space, trans_a, trans_b, alpha, A, B, beta, C, path);
}

namespace {

template <class Reduced>
void mixed_product(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                   const tensor::ConstMatrix<Reduced>& A, const tensor::ConstMatrix<Reduced>& B, float beta,
                   const tensor::Matrix<float>& C, GemmPath path) {
  product_shape("gemm_mixed", trans_a, trans_b, A, B, C);
  batched_product<float, Reduced>("gemm_mixed", space, trans_a, trans_b, alpha, whole(A), whole(B), beta, whole(C),
                                  path);
}

#if defined(KPIPE_HAVE_DNNL)
// What runs a oneDNN kernel's products: "AMX-BF16 tiles", ...
std::string units_of(const std::string& kernel) {
  if (kernel.find("amx") != std::string::npos) return "AMX-BF16 tiles";
  if (kernel.find("fp16") != std::string::npos) return "AVX512-FP16 instructions";
  if (kernel.find("bf16") != std::string::npos) return "AVX512-BF16 dot products";
  return "emulated by oneDNN on this CPU's float32 units, which have no instructions for the type";
}
#endif

}  // namespace

void gemm_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                const tensor::ConstMatrix<tensor::BFloat16>& A, const tensor::ConstMatrix<tensor::BFloat16>& B,
                float beta, const tensor::Matrix<float>& C, GemmPath path) {
  mixed_product(space, trans_a, trans_b, alpha, A, B, beta, C, path);
}

void gemm_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                const tensor::ConstMatrix<tensor::Half>& A, const tensor::ConstMatrix<tensor::Half>& B, float beta,
                const tensor::Matrix<float>& C, GemmPath path) {
  mixed_product(space, trans_a, trans_b, alpha, A, B, beta, C, path);
}

void gemm_batched_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                        const ConstBatch<tensor::BFloat16>& A, const ConstBatch<tensor::BFloat16>& B, float beta,
                        const Batch<float>& C, GemmPath path) {
  batched_product<float>("gemm_batched_mixed", space, trans_a, trans_b, alpha, A, B, beta, C, path);
}

void gemm_batched_mixed(const tensor::ExecutionSpace& space, Trans trans_a, Trans trans_b, float alpha,
                        const ConstBatch<tensor::Half>& A, const ConstBatch<tensor::Half>& B, float beta,
                        const Batch<float>& C, GemmPath path) {
  batched_product<float>("gemm_batched_mixed", space, trans_a, trans_b, alpha, A, B, beta, C, path);
}

std::string mixed_gemm_library(tensor::DType operands) {
  const char* type = tensor::name_of(operands);
  constexpr Vendor vendor = default_vendor();
#if defined(KOKKOS_ENABLE_CUDA)
  if (vendor == Vendor::cublas) {
    return fmt::format("{} GemmEx, {} operands with CUBLAS_COMPUTE_32F (tensor cores where the GPU has them)",
                       detail::cublas_version(), type);
  }
#endif
  if (vendor == Vendor::none) return "the portable kernel (this build has no vendor BLAS)";
#if defined(KPIPE_HAVE_DNNL)
  const std::string kernel = operands == tensor::DType::float16 ? detail::onednn_kernel<tensor::Half>()
                                                                : detail::onednn_kernel<tensor::BFloat16>();
  if (!kernel.empty()) return fmt::format("{} matmul, {} ({})", detail::onednn_version(), kernel, units_of(kernel));
  return fmt::format(
      "emulated in float32: operands widened for the vendor GEMM (cblas), as {} has no {} matmul kernel for this CPU",
      detail::onednn_version(), type);
#else
  return fmt::format(
      "emulated in float32: {} operands widened for the vendor GEMM (cblas), as this build has no oneDNN", type);
#endif
}

void load_gemm_library(const tensor::ExecutionSpace& space, GemmPath path, Precision precision) {
  constexpr int n = 64;  // past the sizes libraries special-case
  const auto A = tensor::zero_matrix<float>("kpipe::kernels::load_gemm_library", n, n);
  const auto C = tensor::zero_matrix<float>("kpipe::kernels::load_gemm_library", n, n);
  gemm<float>(space, Trans::no, Trans::no, 1, A, A, 0, C, path);
  // A head's block of a wider projection times another's transpose, as
  // attention multiplies them: oneDNN runs such strided products on its JIT
  // sgemm, whose first use makes megabytes of kernels and buffers.
  const auto wide = tensor::zero_matrix<float>("kpipe::kernels::load_gemm_library", n, 2 * n);
  const auto head = row_blocks(tensor::ConstMatrix<float>(wide), 1, 0, n);
  const auto scores = row_blocks(C, 1, 0, n);
  gemm_batched<float>(space, Trans::no, Trans::yes, 1, head, head, 0, scores, path);
  if (path == GemmPath::packed) {
    const auto bias = tensor::zero_matrix<float>("kpipe::kernels::load_gemm_library", 1, n);
    PackedWeight<float>().linear_forward(space, A, A, bias, C);
  }
  if (precision == Precision::bf16) {
    const auto A16 = tensor::zero_matrix<tensor::BFloat16>("kpipe::kernels::load_gemm_library", n, n);
    gemm_mixed(space, Trans::no, Trans::no, 1, A16, A16, 0, C, path);
  }
  if (precision == Precision::fp16) {
    const auto A16 = tensor::zero_matrix<tensor::Half>("kpipe::kernels::load_gemm_library", n, n);
    gemm_mixed(space, Trans::no, Trans::no, 1, A16, A16, 0, C, path);
  }
  space.fence();
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                     \
  template void gemm<Scalar>(const tensor::ExecutionSpace&, Trans, Trans, Scalar, const tensor::ConstMatrix<Scalar>&, \
                             const tensor::ConstMatrix<Scalar>&, Scalar, const tensor::Matrix<Scalar>&, GemmPath);    \
  template void gemm<Scalar>(const tensor::ExecutionSpace&, Trans, Trans, Scalar, const tensor::ConstMatrix<Scalar>&, \
                             const tensor::ConstMatrix<Scalar>&, Scalar, const tensor::Matrix<Scalar>&,               \
                             const ColumnEpilogue<Scalar>&, GemmPath);                                                \
  template void apply_epilogue<Scalar>(const tensor::ExecutionSpace&, const ColumnEpilogue<Scalar>&,                  \
                                       const tensor::Matrix<Scalar>&);                                                \
  template void gemm_batched<Scalar>(const tensor::ExecutionSpace&, int, Trans, Trans, Scalar,                        \
                                     const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&, Scalar,  \
                                     const tensor::Matrix<Scalar>&, GemmPath);                                        \
  template void gemm_batched<Scalar>(const tensor::ExecutionSpace&, Trans, Trans, Scalar, const ConstBatch<Scalar>&,  \
                                     const ConstBatch<Scalar>&, Scalar, const Batch<Scalar>&, GemmPath);              \
  template Batch<Scalar> row_blocks<Scalar>(const tensor::Matrix<Scalar>&, int, int, int);                            \
  template ConstBatch<Scalar> row_blocks<const Scalar>(const tensor::ConstMatrix<Scalar>&, int, int, int);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

// Batches of bfloat16 and float16 for gemm_batched_mixed.
#define KPIPE_INSTANTIATE(Scalar)                                                          \
  template Batch<Scalar> row_blocks<Scalar>(const tensor::Matrix<Scalar>&, int, int, int); \
  template ConstBatch<Scalar> row_blocks<const Scalar>(const tensor::ConstMatrix<Scalar>&, int, int, int);
KPIPE_INSTANTIATE(tensor::BFloat16)
KPIPE_INSTANTIATE(tensor::Half)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
