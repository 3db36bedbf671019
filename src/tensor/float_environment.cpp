#include "kpipe/tensor/float_environment.hpp"

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace kpipe::tensor {

namespace {

std::string& mode() {
  static std::string set = "not set";
  return set;
}

}  // namespace

std::string flush_subnormals_to_zero() {
#if defined(__x86_64__) || defined(_M_X64)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  mode() = "subnormals flushed to zero (x86 FTZ and DAZ)";
#elif defined(__aarch64__)
  std::uint64_t fpcr = 0;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  asm volatile("msr fpcr, %0" : : "r"(fpcr | (std::uint64_t{1} << 24)));  // FZ
  mode() = "subnormals flushed to zero (AArch64 FPCR.FZ)";
#else
  mode() = "subnormals kept (no flush-to-zero mode known on this CPU)";
#endif
  return mode();
}

const std::string& subnormal_mode() { return mode(); }

}  // namespace kpipe::tensor
