#pragma once
// The column sums every bias gradient takes, in one order on every backend and
// in a GEMM's epilogue: each column summed over the rows in ascending order,
// from zero, and only then added to its running sum. Host threads take blocks
// of columns, so the inner loop is contiguous and the block's partial sums stay
// in registers; GPU threads take a column each.

#include <type_traits>

#include "host_loops.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::kernels::detail {

constexpr int column_block = host_memory ? 64 : 1;

// sums(0, first + j) += X(0, first + j) + X(1, first + j) + ... for j < width
// (at most block), X's entries widened to Sum first when they are reduced.
template <int block, class In, class Sum>
KOKKOS_FORCEINLINE_FUNCTION void add_block_column_sums(const tensor::ConstMatrix<In>& X,
                                                       const tensor::Matrix<Sum>& sums, int first, int width) {
  const int rows = static_cast<int>(X.extent(0));
  Sum sum[block] = {};
  for (int i = 0; i < rows; ++i) {
    const In* row = &X(i, first);
    for (int j = 0; j < width; ++j) {
      if constexpr (std::is_same_v<In, Sum>) {
        sum[j] += row[j];
      } else {
        sum[j] += tensor::to_float(row[j]);
      }
    }
  }
  for (int j = 0; j < width; ++j) sums(0, first + j) += sum[j];
}

// The same over columns [first, last) on the calling host thread, in the
// clone of host_loop for this CPU.
template <class In, class Sum>
void add_column_sums_on_host(const tensor::ConstMatrix<In>& X, const tensor::Matrix<Sum>& sums, int first, int last) {
  const int blocks = (last - first + column_block - 1) / column_block;
  host_loop(
      [&](std::int64_t b) {
        const int begin = first + static_cast<int>(b) * column_block;
        if (last - begin >= column_block) {
          add_block_column_sums<column_block>(X, sums, begin, column_block);
        } else {
          add_block_column_sums<column_block>(X, sums, begin, last - begin);
        }
      },
      0, blocks);
}

}  // namespace kpipe::kernels::detail
