#include "kpipe/comm/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kpipe/comm/session.hpp"

namespace kpipe::comm {

namespace {

MPI_Comm notices = MPI_COMM_NULL;
constexpr int notice_tag = 1;
// How long a rank whose wait timed out listens for the others that did.
constexpr double notice_seconds = 0.5;

// Receives every notice that has arrived; whether one came from a rank below `limit`.
bool heard_from_below(int limit) {
  bool heard = false;
  for (;;) {
    int pending = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, notice_tag, notices, &pending, &status);
    if (!pending) return heard;
    int sender = 0;
    MPI_Recv(&sender, 1, MPI_INT, status.MPI_SOURCE, notice_tag, notices, MPI_STATUS_IGNORE);
    heard = heard || status.MPI_SOURCE < limit;
  }
}

// Whether this rank, whose wait timed out, reports it: not when another
// rank's timeout came first, nor when a lower rank's came within
// notice_seconds of its own.
bool reports_timeout() {
  if (notices == MPI_COMM_NULL) return true;
  int rank = 0, size = 1;
  MPI_Comm_rank(notices, &rank);
  MPI_Comm_size(notices, &size);
  if (heard_from_below(size)) return false;
  static int sent_rank;  // outlives the sends, which are never waited for
  sent_rank = rank;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MPI_Request request;
    MPI_Isend(&sent_rank, 1, MPI_INT, peer, notice_tag, notices, &request);
    MPI_Request_free(&request);
  }
  for (const double until = MPI_Wtime() + notice_seconds; MPI_Wtime() < until;) {
    if (heard_from_below(rank)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

void open_watchdog_notices() { MPI_Comm_dup(MPI_COMM_WORLD, &notices); }

void close_watchdog_notices() {
  if (notices != MPI_COMM_NULL) MPI_Comm_free(&notices);
}

bool Watchdog::finished_in_time(MPI_Request& request, double idle_seconds) const {
  const double start = MPI_Wtime();
  double deadline = start + seconds_ + std::max(idle_seconds, 0.0);
  double previous = start;
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
    // A gap between two polls is time this rank did not run (stopped, or
    // starved by its node): the wait was not the peers' to answer, and the
    // rank that stopped must not report the others' timeout as its own.
    if (now - previous > stalled_seconds) deadline += now - previous;
    previous = now;
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

void Watchdog::abort_job(const std::string& waiting_for, bool tell_others) const {
  if (tell_others && !reports_timeout()) {
    // The reporting rank's abort ends this one; should it not come, end quietly.
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * notice_seconds + abort_grace_seconds));
    end_world(1);
  }
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
          watchdog.abort_job(waiting_for, /*tell_others=*/false);
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
