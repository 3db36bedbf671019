#include "kpipe/tensor/float_environment.hpp"

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace kpipe::tensor {

namespace {

#if defined(__aarch64__)
constexpr std::uint64_t fpcr_fz = std::uint64_t{1} << 24;

std::uint64_t fpcr() {
  std::uint64_t value = 0;
  asm volatile("mrs %0, fpcr" : "=r"(value));
  return value;
}
#endif

}  // namespace

void flush_subnormals_to_zero() {
#if defined(__x86_64__) || defined(_M_X64)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#elif defined(__aarch64__)
  asm volatile("msr fpcr, %0" : : "r"(fpcr() | fpcr_fz));
#endif
}

std::string subnormal_mode() {
#if defined(__x86_64__) || defined(_M_X64)
  const bool flushed =
      _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON && _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
  return flushed ? "subnormals flushed to zero (x86 FTZ and DAZ)" : "subnormals kept (x86 FTZ and DAZ off)";
#elif defined(__aarch64__)
  return (fpcr() & fpcr_fz) ? "subnormals flushed to zero (AArch64 FPCR.FZ)" : "subnormals kept (AArch64 FPCR.FZ off)";
#else
  return "subnormals kept (no flush-to-zero mode known on this CPU)";
#endif
}

}  // namespace kpipe::tensor
