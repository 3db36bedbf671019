#pragma once
// The floating-point environment of kpipe's host threads. Subnormal floats
// (below 1.2e-38) are flushed to zero: x86 cores take microcode assists on
// them, and a classifier whose loss nears zero fills its gradients with them,
// which slowed the quickstart's last stage, and so the whole pipeline, several
// times over. Every framework's CPU path runs this way (PyTorch's
// set_flush_denormal, oneDNN's and the Intel compilers' defaults); GPUs keep
// their own per-kernel setting. Set before Kokkos starts its threads, which
// inherit it, so the sequential reference and every pipeline stage compute
// alike.

#include <string>

namespace kpipe::tensor {

// Flushes subnormal results and inputs to zero on the calling thread (x86
// MXCSR FTZ and DAZ; AArch64 FPCR.FZ); elsewhere nothing.
void flush_subnormals_to_zero();

// The calling thread's mode, read from the CPU, for the run log:
// "subnormals flushed to zero (x86 FTZ and DAZ)" or why they are kept.
std::string subnormal_mode();

}  // namespace kpipe::tensor
