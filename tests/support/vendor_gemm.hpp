#pragma once
// Whether the vendor GEMM is cuBLAS, which picks its kernel by shape (and
// whose batched kernels are not its single-product ones): results that are
// bit for bit the same on CBLAS, oneDNN and the portable kernel differ there
// in their last bits, and the tests hold them to a reference instead.
#include "kpipe/kernels/gemm.hpp"

namespace kpipe::test {

inline bool vendor_gemm_is_cublas() { return kernels::vendor_gemm_library().rfind("cuBLAS", 0) == 0; }

}  // namespace kpipe::test
