#pragma once
// MPI's lifetime for a whole program: initialised by the first object of a
// run, finalised by its destructor, and the one way to end every rank of the
// job from one failing rank.

#include <exception>

namespace kpipe::comm {

class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Prints "kpipe: error: rank R: <what>" and ends every rank of the job with
// `exit_code`; for errors that strike one rank while the others wait on it.
[[noreturn]] void abort_job(const std::exception& error, int exit_code);

// MPI_Abort with a bound: Open MPI's abort waits for its launcher's
// acknowledgement, which has hung (open-mpi/ompi#3225, #5528), and a rank
// that never ends holds the whole job. A rank not ended within
// `abort_grace_seconds` ends itself with `exit_code`; the launcher then
// ends the others as it does for any rank that exits without MPI_Finalize.
inline constexpr double abort_grace_seconds = 2.0;
[[noreturn]] void end_world(int exit_code);

}  // namespace kpipe::comm
