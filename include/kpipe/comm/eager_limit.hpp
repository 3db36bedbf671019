#pragma once
// Open MPI's shared-memory transport sends a message above its eager limit
// (4 KiB by default) by rendezvous: the data moves only once the receiver
// enters MPI again, and a rank inside a kernel does not. A pipeline's
// boundary messages of small microbatches are a few KiB to a few tens of KiB
// (the quickstart's are 16 KiB), so each waited for the peer's next action
// boundary. kpipe raises the limit to the transport's largest fragment,
// 32 KiB, before MPI starts, unless the environment already sets it (as
// `mpirun --mca btl_vader_eager_limit N` does); larger messages keep the
// single-copy rendezvous, which suits them.

#include <string>

namespace kpipe::comm {

inline constexpr long preferred_eager_bytes = 32768;

// With Open MPI, sets OMPI_MCA_btl_vader_eager_limit (Open MPI 4's name) and
// OMPI_MCA_btl_sm_eager_limit (Open MPI 5's) to preferred_eager_bytes where
// the environment sets neither. Call before MPI_Init.
void prefer_eager_shared_memory();

// For the run log: "32768 bytes (kpipe's default, ...)", the environment's
// value, or why there is none.
const std::string& shared_memory_eager_limit();

}  // namespace kpipe::comm
