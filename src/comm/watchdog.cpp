#include "kpipe/comm/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kpipe/comm/session.hpp"

namespace kpipe::comm {

bool Watchdog::finished_in_time(MPI_Request& request, double idle_seconds) const {
  const double start = MPI_Wtime();
  const double deadline = start + seconds_ + std::max(idle_seconds, 0.0);
  // Waits inside a pipeline step last microseconds to milliseconds: poll
  // without sleeping first (a sleep overshoots by the kernel's timer slack,
  // tens of microseconds, which becomes latency on every transfer), yielding
  // so that oversubscribed ranks still hand their core to the ranks doing the
  // work; then short sleeps, whose overshoot is small beside the wait; and
  // millisecond sleeps for long waits (a peer writing a checkpoint).
  for (long polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    const double now = MPI_Wtime();
    if (now > deadline) return false;
    const double waited = now - start;
    if (waited > short_sleep_seconds) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else if (waited > poll_seconds) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    } else if (polls > busy_polls) {
      std::this_thread::yield();
    }
  }
}

void Watchdog::abort_job(const std::string& waiting_for) const {
  std::fprintf(stderr,
               "kpipe: error: watchdog: rank %d waited more than %g s (runtime.watchdog_seconds) %s; "
               "a peer rank died, hangs, or the schedule is inconsistent\n",
               world_rank_, seconds_, waiting_for.c_str());
  std::fflush(stderr);
  end_world(1);
}

Deadline::Deadline(const Watchdog& watchdog, double seconds, std::string waiting_for)
    : guard_([this, &watchdog, seconds, waiting_for = std::move(waiting_for)] {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!returned_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
          watchdog.abort_job(waiting_for);
        }
      }) {}

Deadline::~Deadline() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  returned_.notify_one();
  guard_.join();
}

}  // namespace kpipe::comm
