#pragma once
// The one place where Kokkos version differences are bridged (3.4 through 5.x),
// so the rest of kpipe is written against a single API.

#include <Kokkos_Core.hpp>
#if KOKKOS_VERSION >= 40100
#include <Kokkos_Profiling_ScopedRegion.hpp>
#endif

#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kpipe/tensor/float_environment.hpp"

namespace kpipe::tensor::compat {

// Whether the calling thread is inside a host parallel region. Kokkos 4
// deprecates OpenMP::in_parallel; OpenMP itself answers the same question.
inline bool in_host_parallel_region() {
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION >= 40000
  return omp_in_parallel() != 0;
#else
  return Kokkos::DefaultHostExecutionSpace::in_parallel();
#endif
}

// An instance of `ExecutionSpace` on which one thread of a host parallel
// region may launch kernels while the region's other threads launch theirs:
// they run on that thread alone. Kokkos 4's OpenMP holds an instance's lock
// for a whole dispatch, the region's on the default instance, so each such
// thread needs an instance of its own, of one thread (a launch from inside a
// region then runs inline). Elsewhere (Serial, Kokkos 3) the default instance
// serves.
template <class ExecutionSpace>
ExecutionSpace calling_thread_instance() {
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION >= 40000
  if constexpr (std::is_same_v<ExecutionSpace, Kokkos::OpenMP>) return Kokkos::OpenMP(1);
#endif
  return ExecutionSpace();
}

// Whether a tool (kokkos-tools, a profiler) receives kernel events.
inline bool kernels_observed() {
  const auto& tool = Kokkos::Tools::Experimental::get_callbacks();
  return tool.begin_parallel_for != nullptr || tool.begin_parallel_reduce != nullptr ||
         tool.begin_parallel_scan != nullptr;
}

// Whether a tool receives profiling regions or kernel events; work that
// launches kernels from several host threads at once then stays on the
// calling thread. Regions nest on one thread, so regions pushed from several
// threads would interleave in the tool's record; and Kokkos fences every
// instance around a kernel event (unless the tool turns global fencing off),
// which a launch from inside a host parallel region would wait on for ever,
// the region holding its own instance.
inline bool observed_by_tool() {
  return Kokkos::Tools::Experimental::get_callbacks().push_region != nullptr || kernels_observed();
}

// The name Kokkos is given for a kernel: `name` where a tool receives kernel
// events, none otherwise. Kokkos takes it as a const std::string&, and a
// name longer than the 15 characters a std::string holds inline cost a heap
// allocation on every launch, a dozen per microbatch.
inline std::string kernel_label(const char* name) { return kernels_observed() ? std::string(name) : std::string(); }

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

// Kokkos::initialize with Kokkos' own warnings off, for every kpipe program
// (the executable, tests, benchmarks). Kokkos 4's OpenMP backend warns on
// stderr when OMP_PROC_BIND is unset and when ranks times threads exceed the
// cores; kpipe owns its stderr (a bad input is one `kpipe: error:` line), so
// --kokkos-disable-warnings goes first on Kokkos' command line. Kokkos 3.4 and
// 4.x both know the flag (4.x also as =true/false; set_disable_warnings(true)
// is the same switch, but Kokkos has no public call taking both settings and
// argv). The user decides when they asked: a --kokkos-disable-warnings[=...]
// of their own, or KOKKOS_DISABLE_WARNINGS (Kokkos 3 aborts if flag and
// variable disagree). Like Kokkos::initialize, it removes from argc/argv the
// flags Kokkos consumed. Subnormals are flushed first, so that every thread
// Kokkos starts inherits it (float_environment.hpp).
inline void initialize(int& argc, char* argv[]) {
  flush_subnormals_to_zero();
  static char disable_warnings[] = "--kokkos-disable-warnings";
  bool user_chose = argc < 1 || std::getenv("KOKKOS_DISABLE_WARNINGS") != nullptr;
  for (int i = 1; i < argc && !user_chose; ++i) {
    user_chose = std::string_view(argv[i]).rfind(disable_warnings, 0) == 0;
  }
  if (user_chose) {
    Kokkos::initialize(argc, argv);
    return;
  }
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + 1, disable_warnings);
  int args_count = static_cast<int>(args.size());
  args.push_back(nullptr);
  Kokkos::initialize(args_count, args.data());
  int kept = 0;
  for (int i = 0; i < args_count; ++i) {
    if (args[i] != disable_warnings) argv[kept++] = args[i];
  }
  argv[kept] = nullptr;  // kept <= argc, and argv[argc] exists
  argc = kept;
}

inline std::string kokkos_version() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}

// Fences one execution-space instance (on CUDA: one stream), never the device.
// Named fences arrived in 3.6; the name shows up in Kokkos Tools.
template <class ExecutionSpace>
void fence(const ExecutionSpace& space, const std::string& name) {
#if KOKKOS_VERSION >= 30600
  space.fence(name);
#else
  (void)name;
  space.fence();
#endif
}

// A profiling region for the lifetime of the object (Kokkos Tools, Nsight
// through the NVTX connector). Kokkos has its own since 4.1 (ArborX switches
// at the same version); before that, push/popRegion in RAII form. Neither can
// be copied or moved: return one as a prvalue and bind it to a named local.
#if KOKKOS_VERSION >= 40100
using ScopedRegion = Kokkos::Profiling::ScopedRegion;
#else
class [[nodiscard]] ScopedRegion {
 public:
  explicit ScopedRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
};
#endif

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

}  // namespace kpipe::tensor::compat
