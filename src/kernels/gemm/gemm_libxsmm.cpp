// The packed backend for CPUs on which oneDNN keeps the weights row-major
// (AVX2 ones, for oneDNN 2.6): op(W) is packed into panels of
// `libxsmm_panel_width` columns, each panel's k rows contiguous, and every product is a sequence of
// libxsmm JIT kernels of one panel by a block of up to `row_block` rows of X,
// X read in place. OpenBLAS re-packs the whole weight on every call, a large
// part of the time of the MLP's 32 x 1024 x 1024 products; here a step packs
// each weight once. A narrower last panel is zero-padded, computed into a
// small tile and copied out, so every kernel has the same shape; a kernel of
// fixed shape sums each output in a fixed order, so the results are
// deterministic. The weight gradient Xᵀ dY has nothing to pack and stays on
// the vendor GEMM.
#include <fmt/format.h>
#include <libxsmm.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::kernels::detail {

namespace {

constexpr int panel_width = libxsmm_panel_width;
constexpr int row_block = 32;  // rows of X per kernel call, so a block stays in L1/L2 across the panels

int panel_count(int n) { return (n + panel_width - 1) / panel_width; }

// libxsmm is column-major: a kernel of (m, n, k) computes C (m x n) = A (m x k) B (k x n). A row-major
// product Y = X op(W) is Yᵀ = op(W)ᵀ Xᵀ, so m runs over a panel's columns, n over rows of X, k over X's columns.
// The kernel of one panel (leading dimension panel_width) by `rows` rows of X (ldx) into C (ldc); null if refused.
libxsmm_smmfunction kernel(int rows, int k, int ldx, int ldc) {
  const libxsmm_blasint m = panel_width, n = rows, kk = k, a = panel_width, b = ldx, c = ldc;
  const float alpha = 1.0f, beta = 0.0f;
  return libxsmm_smmdispatch(m, n, kk, &a, &b, &c, &alpha, &beta, nullptr, nullptr);
}

libxsmm_smmfunction checked(libxsmm_smmfunction f, int rows, int k) {
  if (!f) throw runtime_error(fmt::format("libxsmm has no kernel for {} rows by {} x {}", rows, k, panel_width));
  return f;
}

class LibxsmmPacked final : public PackedBackend<float> {
 public:
  void invalidate() override { ++version_; }

  void product(const GemmOperands<float>& op, const float* bias) override {
    const Packed& w = packed(op);
    const int panels = panel_count(op.n);
    const int full_panels = op.n / panel_width;
    for (int r0 = 0; r0 < op.m; r0 += row_block) {
      const int rows = std::min(row_block, op.m - r0);
      const float* x = op.a + static_cast<std::size_t>(r0) * op.lda;
      float* y = op.c + static_cast<std::size_t>(r0) * op.ldc;
      if (full_panels > 0) {
        const libxsmm_smmfunction into_y = checked(kernel(rows, op.k, op.lda, op.ldc), rows, op.k);
        for (int j = 0; j < full_panels; ++j) into_y(w.panel(j), x, y + j * panel_width);
      }
      if (full_panels < panels) {
        // The zero-padded last panel into a rows x panel tile; its first n % panel columns are Y's.
        checked(kernel(rows, op.k, op.lda, panel_width), rows, op.k)(w.panel(full_panels), x, tile_.data());
        const int width = op.n - full_panels * panel_width;
        for (int r = 0; r < rows; ++r) {
          std::memcpy(y + static_cast<std::size_t>(r) * op.ldc + full_panels * panel_width, &tile_[r * panel_width],
                      sizeof(float) * width);
        }
      }
      // The bias row block by row block, while the block is still in the cache.
      if (bias) {
        for (int r = 0; r < rows; ++r) {
          float* row = y + static_cast<std::size_t>(r) * op.ldc;
          for (int j = 0; j < op.n; ++j) row[j] += bias[j];
        }
      }
    }
  }

  void gemm(const GemmOperands<float>& op) override { cblas_gemm(op); }

 private:
  // op(W) (k x n) as panels: panel j holds its columns j·w … j·w + w - 1 (w = panel_width) as k rows of w.
  struct Packed {
    int k = 0, n = 0;
    long version = 0;
    std::vector<float> values;
    const float* panel(int j) const { return values.data() + static_cast<std::size_t>(j) * k * panel_width; }
  };

  // W's or Wᵀ's panels, repacked from op.b when W changed since (or the shape is new).
  const Packed& packed(const GemmOperands<float>& op) {
    Packed& p = op.trans_b == Trans::no ? forward_ : transposed_;
    if (p.version == version_ && p.k == op.k && p.n == op.n) return p;
    const int panels = panel_count(op.n);
    if (p.k != op.k || p.n != op.n) {
      p.k = op.k;
      p.n = op.n;
      p.values.assign(static_cast<std::size_t>(panels) * op.k * panel_width, 0.0f);  // packing never writes the padding
    }
    if (op.trans_b == Trans::no) {
      // op(W) = W, k x n row-major: each row's segment of a panel is contiguous in W.
      for (int kk = 0; kk < op.k; ++kk) {
        const float* row = op.b + static_cast<std::size_t>(kk) * op.ldb;
        for (int j = 0; j < panels; ++j) {
          const int width = std::min(panel_width, op.n - j * panel_width);
          std::memcpy(&p.values[(static_cast<std::size_t>(j) * op.k + kk) * panel_width], row + j * panel_width,
                      sizeof(float) * width);
        }
      }
    } else {
      // op(W) = Wᵀ with W n x k row-major: W's row c is column c of op(W), one element per panel row.
      for (int c = 0; c < op.n; ++c) {
        const float* row = op.b + static_cast<std::size_t>(c) * op.ldb;
        float* column = &p.values[static_cast<std::size_t>(c / panel_width) * op.k * panel_width + c % panel_width];
        for (int kk = 0; kk < op.k; ++kk) column[static_cast<std::size_t>(kk) * panel_width] = row[kk];
      }
    }
    p.version = version_;
    return p;
  }

  Packed forward_, transposed_;
  std::array<float, row_block * panel_width> tile_{};
  long version_ = 1;  // starts ahead of every copy: the first use packs
};

}  // namespace

bool libxsmm_available() {
  // JIT kernels need AVX2 or newer; older CPUs (and a refused dispatch) keep the vendor path.
  static const bool available =
      libxsmm_get_target_archid() >= LIBXSMM_X86_AVX2 && kernel(row_block, 1024, 1024, 1024) != nullptr;
  return available;
}

std::unique_ptr<PackedBackend<float>> make_libxsmm_packed() { return std::make_unique<LibxsmmPacked>(); }

}  // namespace kpipe::kernels::detail
