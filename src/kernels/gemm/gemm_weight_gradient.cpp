// The weight gradient's product, dW += X^T dY over a microbatch's rows,
// streamed through dW. With k (the rows) small, the product does 2k FLOPs
// per element of dW and reads and writes every element once; a gradient
// larger than L2 comes from L3 or memory when its W runs, and the product is
// bound by how fast dW streams. oneDNN 2.6's tiles did not stream: from
// memory they ran far below a copy's bandwidth (docs/performance.md, "AMD
// EPYC, Zen 5"). Here each block of 8 rows x 64 columns of dW is loaded once,
// takes all k products in registers, is stored once, and the next block's
// rows are prefetched while it computes.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "gemm_backends.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define KPIPE_STREAMED_WEIGHT_GRADIENT 1
#include <immintrin.h>
#endif

namespace kpipe::kernels::detail {

namespace {

// Rows of the microbatch up to which the product streams; beyond, each
// element of dW takes enough FLOPs that the library's blocking wins.
constexpr int max_rows = 64;

// The L2 of a core, where the operating system says (1 MiB where it does not).
std::size_t l2_bytes() {
  static const std::size_t bytes = [] {
    const long reported = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return reported > 0 ? static_cast<std::size_t>(reported) : std::size_t{1} << 20;
  }();
  return bytes;
}

#if defined(KPIPE_STREAMED_WEIGHT_GRADIENT)

constexpr int block_rows = 8;
constexpr int block_vectors = 4;  // of 16 floats
constexpr int block_columns = 16 * block_vectors;

// dW's rows [i, i + Rows) x columns [j, j + width) (width <= 64) += A^T B,
// each element summed in ascending row order of the microbatch with one
// rounding per row (FMA), whatever the block's shape: the result does not
// depend on where blocks or column slices fall.
template <int Rows>
__attribute__((target("avx512f"))) void accumulate_block(const GemmOperands<float>& op, int i, int j, int width,
                                                         bool prefetch_next) {
  __mmask16 lanes[block_vectors];
  for (int q = 0; q < block_vectors; ++q) {
    const int left = width - 16 * q;
    lanes[q] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  __m512 c[Rows][block_vectors];
  float* const C = op.c + static_cast<std::ptrdiff_t>(i) * op.ldc + j;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < block_vectors; ++q) c[r][q] = _mm512_maskz_loadu_ps(lanes[q], C + r * op.ldc + 16 * q);
  }
  if (prefetch_next) {
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < block_vectors; ++q) {
        _mm_prefetch(reinterpret_cast<const char*>(C + (Rows + r) * op.ldc + 16 * q), _MM_HINT_T0);
      }
    }
  }
  const float* a = op.a + i;
  const float* b = op.b + j;
  for (int p = 0; p < op.k; ++p, a += op.lda, b += op.ldb) {
    __m512 row[block_vectors];
#pragma GCC unroll 4
    for (int q = 0; q < block_vectors; ++q) row[q] = _mm512_maskz_loadu_ps(lanes[q], b + 16 * q);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r]);
#pragma GCC unroll 4
      for (int q = 0; q < block_vectors; ++q) c[r][q] = _mm512_fmadd_ps(x, row[q], c[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < block_vectors; ++q) _mm512_mask_storeu_ps(C + r * op.ldc + 16 * q, lanes[q], c[r][q]);
  }
}

// Whether oneDNN may use AVX-512: ONEDNN_MAX_CPU_ISA=AVX2 caps kpipe's own
// kernel with oneDNN's, so one variable forces a CPU's AVX2 path (with
// OPENBLAS_CORETYPE=Haswell for OpenBLAS) on any machine.
bool onednn_allows_avx512() {
#if defined(KPIPE_HAVE_DNNL)
  return onednn_vector_isa() == VectorIsa::avx512;
#else
  return true;
#endif
}

#endif

}  // namespace

bool streams_weight_gradients() {
#if defined(KPIPE_STREAMED_WEIGHT_GRADIENT)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && onednn_allows_avx512();
  return avx512;
#else
  return false;
#endif
}

bool streamed_weight_gradient(const GemmOperands<float>& op) {
  return streams_weight_gradients() && op.trans_a == Trans::yes && op.trans_b == Trans::no && op.alpha == 1.0f &&
         op.beta == 1.0f && op.k <= max_rows &&
         static_cast<std::size_t>(op.m) * static_cast<std::size_t>(op.n) * sizeof(float) >= l2_bytes();
}

void stream_weight_gradient(const GemmOperands<float>& op) {
#if defined(KPIPE_STREAMED_WEIGHT_GRADIENT)
  int i = 0;
  for (; i + block_rows <= op.m; i += block_rows) {
    for (int j = 0; j < op.n; j += block_columns) {
      accumulate_block<block_rows>(op, i, j, std::min(block_columns, op.n - j), i + block_rows < op.m);
    }
  }
  for (; i < op.m; ++i) {
    for (int j = 0; j < op.n; j += block_columns)
      accumulate_block<1>(op, i, j, std::min(block_columns, op.n - j), false);
  }
#else
  (void)op;
#endif
}

std::string weight_gradient_streaming() {
  return fmt::format(
      "float32 weight gradients over up to {} rows and of at least L2's {} KiB streamed by kpipe's "
      "AVX-512 kernel",
      max_rows, l2_bytes() >> 10);
}

}  // namespace kpipe::kernels::detail
