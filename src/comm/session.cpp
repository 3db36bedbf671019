#include "kpipe/comm/session.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/eager_limit.hpp"
#include "kpipe/comm/watchdog.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::comm {

Session::Session(int& argc, char**& argv) {
  prefer_eager_shared_memory();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  open_watchdog_notices();
}

// MPI_Finalize synchronises the ranks and cannot be watched: a rank stopped
// before it would hold the others there forever. They meet first in a
// barrier the collective watchdog watches (once the runtime has set it).
Session::~Session() {
  try {
    fault::inject(fault::Phase::finalize_stall, rank_);
  } catch (const Error&) {
    // An invalid KPIPE_FAULT, reported where the command first read it; a destructor must not throw.
  }
  barrier(world(), "the barrier before MPI_Finalize");
  close_watchdog_notices();
  MPI_Finalize();
}

void abort_job(const std::exception& error, int exit_code) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "kpipe: error: rank %d: %s\n", rank, bounded_line(error.what()).c_str());
  std::fflush(stderr);
  end_world(exit_code);
}

void end_world(int exit_code) {
  std::thread([exit_code] {
    std::this_thread::sleep_for(std::chrono::duration<double>(abort_grace_seconds));
    std::_Exit(exit_code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return
}

}  // namespace kpipe::comm
