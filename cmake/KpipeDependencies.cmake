# Every third-party package kpipe builds against, found once, here.

find_package(Kokkos REQUIRED)
include(KpipeRepairKokkos)
kpipe_repair_kokkos_target()

find_package(MPI REQUIRED COMPONENTS C CXX)
# comm::Deadline watches blocking collective I/O from a thread.
find_package(Threads REQUIRED)

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "kpipe needs a parallel (MPI) HDF5, but the one found (${HDF5_C_INCLUDE_DIRS}) is serial. "
    "On Debian/Ubuntu install libhdf5-openmpi-dev; elsewhere build HDF5 with --enable-parallel "
    "and point HDF5_ROOT at it.")
endif()

find_package(fmt REQUIRED)
if("CUDA" IN_LIST Kokkos_DEVICES)
  # fmt 9 turns constexpr off for nvcc, yet keeps its consteval format-string
  # checks under C++20, which then cannot be evaluated; nvcc 12+ handles fmt's
  # constexpr code, so every target compiled by nvcc gets it back.
  set_property(TARGET fmt::fmt APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_USE_CONSTEXPR=1)
endif()
find_package(toml11 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
# xxHash for checkpoint checksums, used header-only (XXH_INLINE_ALL): nothing to
# link, and nothing an installed kpipe's consumers need.
find_path(KPIPE_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)

# CBLAS is optional: without it the portable Kokkos GEMM serves the host too.
find_package(BLAS QUIET)
find_path(KPIPE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
if(BLAS_FOUND AND KPIPE_CBLAS_INCLUDE_DIR)
  set(KPIPE_HAVE_CBLAS ON)
  message(STATUS "kpipe: CBLAS from ${BLAS_LIBRARIES}")
else()
  set(KPIPE_HAVE_CBLAS OFF)
  message(STATUS "kpipe: no CBLAS found; host GEMM uses the portable Kokkos kernel")
endif()

# oneDNN is optional: it backs compute.gemm = "packed" (weights reordered once
# per step into its blocked layout). Without it "packed" runs the vendor path.
# Debian ships a package config; elsewhere the header and library suffice.
# That config requires OpenCL (oneDNN's GPU runtime) and stops the configure
# without it, so it is only asked when OpenCL is there.
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  find_package(dnnl CONFIG QUIET)
endif()
if(TARGET DNNL::dnnl)
  set(KPIPE_DNNL_LIBRARIES DNNL::dnnl)
  set(KPIPE_DNNL_CONFIG ON)
else()
  find_path(KPIPE_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(KPIPE_DNNL_LIBRARY dnnl)
  if(KPIPE_DNNL_INCLUDE_DIR AND KPIPE_DNNL_LIBRARY)
    set(KPIPE_DNNL_LIBRARIES ${KPIPE_DNNL_LIBRARY})
  endif()
  set(KPIPE_DNNL_CONFIG OFF)
endif()
if(KPIPE_DNNL_LIBRARIES AND NOT "CUDA" IN_LIST Kokkos_DEVICES)
  set(KPIPE_HAVE_DNNL ON)
  # oneDNN's OpenMP runtime is pinned to one thread per rank (gemm_onednn.cpp):
  # link libgomp for omp_set_num_threads, without compiling kpipe with -fopenmp.
  find_package(OpenMP COMPONENTS CXX)
  message(STATUS "kpipe: oneDNN found; compute.gemm = \"packed\" uses it")
else()
  set(KPIPE_HAVE_DNNL OFF)
  message(STATUS "kpipe: no oneDNN (or a CUDA build); compute.gemm = \"packed\" runs the vendor path")
endif()

# libxsmm is optional too: where oneDNN keeps the weights row-major (AVX2 CPUs)
# its JIT kernels back compute.gemm = "packed" on weights kpipe packs itself.
# The weight gradient stays on CBLAS, so it needs CBLAS, which also serves
# libxsmm's own BLAS fallback (never its libxsmmnoblas stubs, which would
# shadow OpenBLAS's sgemm_). Debian ships a static library; the header and
# library suffice.
find_path(KPIPE_LIBXSMM_INCLUDE_DIR libxsmm.h)
find_library(KPIPE_LIBXSMM_LIBRARY xsmm)
if(KPIPE_LIBXSMM_INCLUDE_DIR AND KPIPE_LIBXSMM_LIBRARY AND KPIPE_HAVE_CBLAS AND NOT "CUDA" IN_LIST Kokkos_DEVICES)
  set(KPIPE_HAVE_LIBXSMM ON)
  set(KPIPE_LIBXSMM_LIBRARIES ${KPIPE_LIBXSMM_LIBRARY} ${BLAS_LIBRARIES} Threads::Threads ${CMAKE_DL_LIBS})
  message(STATUS "kpipe: libxsmm found; compute.gemm = \"packed\" uses it where oneDNN does not block weights")
else()
  set(KPIPE_HAVE_LIBXSMM OFF)
endif()

# SentencePiece is optional: it backs data.tokenizer = "sentencepiece"
# (Debian's libsentencepiece-dev); without it that choice is refused in one line.
find_path(KPIPE_SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(KPIPE_SENTENCEPIECE_LIBRARY sentencepiece)
if(KPIPE_SENTENCEPIECE_INCLUDE_DIR AND KPIPE_SENTENCEPIECE_LIBRARY)
  set(KPIPE_HAVE_SENTENCEPIECE ON)
  message(STATUS "kpipe: SentencePiece found; data.tokenizer = \"sentencepiece\" uses it")
else()
  set(KPIPE_HAVE_SENTENCEPIECE OFF)
  message(STATUS "kpipe: no SentencePiece; data.tokenizer = \"sentencepiece\" is refused")
endif()
