#pragma once
// Which vector ISA the host kernels' loops run in on this CPU: they are
// compiled once per ISA and one clone is picked when the program loads
// (src/kernels/host_loops.hpp). The run log says which.

namespace kpipe::kernels {

// "AVX-512 (x86-64-v4)", "AVX2", "x86-64 baseline (SSE2)", or, where the loops are
// not cloned (other compilers and architectures, device backends), "one
// build for every CPU (not cloned)".
const char* host_loop_isa();

}  // namespace kpipe::kernels
