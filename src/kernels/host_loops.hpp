#pragma once
// Loops of the host backends compiled once per x86-64 vector ISA. A build for
// the generic x86-64 baseline (the default, no -march) vectorises with SSE2
// only, four floats per instruction; GELU, the softmax and LayerNorm are then
// compute-bound. GCC's target_clones compiles a function for AVX2 and AVX-512
// (x86-64-v4: F, BW, CD, DQ and VL, which every AVX-512 CPU since Skylake
// has; with F alone GCC cannot narrow 32-bit lanes to the 16 bits of bfloat16
// and float16, and the conversion loops stay scalar) too and picks one when
// the program loads, as BLAS libraries and PyTorch pick their kernels (Clang
// 14 multiversions neither templates nor flattened functions: a Clang build
// runs the baseline). The kernel files that use it
// are compiled without floating-point contraction (src/kernels/CMakeLists.txt):
// AVX-512 brings FMA, and without contraction every clone rounds exactly as
// the baseline does, so results do not depend on the CPU a run lands on.

#include <algorithm>
#include <cstdint>

#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/matrix.hpp"

#if defined(__x86_64__) && defined(__ELF__) && !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__clang__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define KPIPE_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), flatten))
#define KPIPE_VECTOR_CLONES_ENABLED 1
#endif
#endif
#ifndef KPIPE_VECTOR_CLONES
#define KPIPE_VECTOR_CLONES
#endif

namespace kpipe::kernels::detail {

constexpr bool host_memory = Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible;

// f(i) for i in [begin, end), in the clone for this CPU; f is inlined into each clone.
template <class F>
KPIPE_VECTOR_CLONES void host_loop(const F& f, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) f(i);
}

// f(i) for every i in [0, n), each independent of the others. Host: blocks of
// `grain` indices, each one host_loop; GPUs: a thread per index.
template <class F>
void for_each(const tensor::ExecutionSpace& space, const char* name, std::int64_t n, std::int64_t grain, const F& f) {
  if constexpr (host_memory) {
    // Fewer than `grain` indices per thread: smaller blocks, one per thread,
    // so that the small tensors of short microbatches still use every host
    // thread (the idle ones spin in the fork-join anyway), down to grain/16.
    const std::int64_t threads = tensor::compat::concurrency(space);
    if (threads > 1 && n < grain * threads)
      grain = std::max<std::int64_t>({1, grain / 16, (n + threads - 1) / threads});
    Kokkos::parallel_for(
        tensor::compat::kernel_label(name),
        Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, (n + grain - 1) / grain),
        KOKKOS_LAMBDA(std::int64_t block) {
          const std::int64_t begin = block * grain;
          host_loop(f, begin, n - begin < grain ? n : begin + grain);
        });
  } else {
    Kokkos::parallel_for(tensor::compat::kernel_label(name), Kokkos::RangePolicy<tensor::ExecutionSpace>(space, 0, n),
                         f);
  }
}

// f(first, width) for the blocks [first, first + width) of `block` indices
// that cover [0, n), a block per iteration; width is block but in the last
// one. f is inlined once for the literal block, so that its loops over a full
// block unroll and keep per-index sums in registers instead of on the stack.
template <int block, class F>
void for_each_block(const tensor::ExecutionSpace& space, const char* name, int n, const F& f) {
  for_each(
      space, name, (n + block - 1) / block, 1, KOKKOS_LAMBDA(std::int64_t b) {
        const int first = static_cast<int>(b) * block;
        if (n - first >= block) {
          f(first, block);
        } else {
          f(first, n - first);
        }
      });
}

}  // namespace kpipe::kernels::detail
