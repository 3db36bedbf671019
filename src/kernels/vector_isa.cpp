#include "kpipe/kernels/vector_isa.hpp"

#include "host_loops.hpp"

namespace kpipe::kernels {

const char* host_loop_isa() {
#if defined(KPIPE_VECTOR_CLONES_ENABLED)
  // The resolver's order: the first clone whose features the CPU has.
  if (__builtin_cpu_supports("x86-64-v4")) return "AVX-512 (x86-64-v4)";
  if (__builtin_cpu_supports("avx2")) return "AVX2";
  return "x86-64 baseline (SSE2)";
#else
  return "one build for every CPU (not cloned)";
#endif
}

}  // namespace kpipe::kernels
