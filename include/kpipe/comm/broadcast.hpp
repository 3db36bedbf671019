#pragma once
// Input files (the deck, a schedule file) are read by rank 0 alone and
// broadcast, so every rank parses the same text even when the nodes see
// different files. A read error reaches every rank as the same input error,
// so all ranks fail alike and rank 0 alone reports it.

#include <mpi.h>

#include <functional>
#include <string>

namespace kpipe::comm {

// Runs `read` on rank 0 of `comm` and returns its text on every rank; a
// kpipe::Error thrown by `read` is rethrown on every rank as an input error.
std::string broadcast_from_root(MPI_Comm comm, const std::function<std::string()>& read);

}  // namespace kpipe::comm
