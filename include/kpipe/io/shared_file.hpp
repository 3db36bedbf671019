#pragma once
// The ranks that write one shared file together (a checkpoint), and the two
// agreements such a file needs among them: every rank's list of what it
// holds, and rank 0's decisions (the temporary name, whether publishing it
// worked). io does not use comm (DESIGN.md §2), so its caller hands these in:
// runtime's implementation runs them over comm, under the collective
// watchdog, and io makes no MPI collective call of its own. The file's
// collective HDF5 calls (MPI-IO) are libhdf5's, with communicator().

#include <mpi.h>

#include <string>
#include <vector>

#include "kpipe/core/error.hpp"

namespace kpipe::io {

// What every rank of a shared file throws alike, having learnt it from the
// same agreement (rank 0's failure to create or publish the file, a list of
// tensors that cannot be written): the caller may end the job collectively,
// with one line, instead of each rank reporting it.
class SharedFileError : public Error {
 public:
  using Error::Error;
};

class SharedFileRanks {
 public:
  virtual ~SharedFileRanks() = default;
  // What parallel HDF5 opens the file with.
  virtual MPI_Comm communicator() const = 0;
  virtual int rank() const = 0;
  // Every rank's `mine`, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& mine) const = 0;
  // Rank 0's `text` on every rank (what the others pass is ignored).
  virtual std::string broadcast(const std::string& text) const = 0;
};

}  // namespace kpipe::io
