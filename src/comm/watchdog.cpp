#include "kpipe/comm/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kpipe::comm {

bool Watchdog::finished_in_time(MPI_Request& request) const {
  const double deadline = MPI_Wtime() + seconds_;
  // Spin briefly for the common fast case, then back off so oversubscribed
  // ranks leave the cores to the ranks doing the work.
  for (long polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (MPI_Wtime() > deadline) return false;
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 100000 ? 1000 : 20));
  }
}

void Watchdog::abort_job(const std::string& waiting_for) const {
  std::fprintf(stderr,
               "kpipe: error: watchdog: rank %d waited more than %g s (runtime.watchdog_seconds) %s; "
               "a peer rank died, hangs, or the schedule is inconsistent\n",
               world_rank_, seconds_, waiting_for.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace kpipe::comm
