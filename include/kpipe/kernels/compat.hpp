#pragma once
// The one place where Kokkos version differences are bridged (3.4 through 5.x),
// so the rest of kpipe is written against a single API.

#include <Kokkos_Core.hpp>

#include <limits>
#include <string>

namespace kpipe::compat {

// Kokkos 4 made concurrency() an instance member; 3.x has it static.
template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
int concurrency(const ExecutionSpace& space = ExecutionSpace()) {
#if KOKKOS_VERSION >= 40000
  return space.concurrency();
#else
  (void)space;
  return ExecutionSpace::concurrency();
#endif
}

inline std::string kokkos_version() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}

// Math functions moved from Kokkos::Experimental to Kokkos in 3.7.
#if KOKKOS_VERSION >= 30700
namespace math = ::Kokkos;
#else
namespace math = ::Kokkos::Experimental;
#endif

// Kokkos::min and Kokkos::max arrived in 3.5; these work in kernels on every version.
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T max(T a, T b) {
  return a < b ? b : a;
}

// A quiet NaN inside kernels; Kokkos has its own numeric traits since 3.6.
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T quiet_nan() {
#if KOKKOS_VERSION >= 30600
  return Kokkos::Experimental::quiet_NaN<T>::value;
#else
  return std::numeric_limits<T>::quiet_NaN();
#endif
}

}  // namespace kpipe::compat
