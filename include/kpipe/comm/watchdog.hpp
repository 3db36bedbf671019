#pragma once
// Every blocking wait of the runtime goes through the watchdog (DESIGN.md §4):
// a wait longer than runtime.watchdog_seconds aborts the whole job with one
// message naming the rank, the action and the message it waits for, instead of
// hanging until the batch system kills it. A stopped rank holds every other
// rank, and their waits time out together: a rank that times out tells the
// others over the watchdog's own communicator, and of those that time out
// within half a second of each other the lowest reports; one that heard of an
// earlier timeout stays quiet, so the job ends with one line.

#include <mpi.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace kpipe::comm {

class Watchdog {
 public:
  Watchdog(double seconds, int world_rank) : seconds_(seconds), world_rank_(world_rank) {}

  double seconds() const { return seconds_; }

  // Completes `request`; `describe()` is called only on a timeout, so callers
  // build the message lazily and the common path costs nothing. `idle_seconds`
  // is how long the peer may rightly have nothing to send before its time
  // starts to count (a request trace's gap until the next arrival).
  template <class Describe>
  void wait(MPI_Request& request, Describe&& describe, double idle_seconds = 0.0) const {
    if (!finished_in_time(request, idle_seconds)) abort_job(describe());
  }

 private:
  friend class Deadline;
  // How a wait waits (watchdog.cpp): polls, yielding after busy_polls, for
  // poll_seconds; then 20 us sleeps until short_sleep_seconds; then 1 ms ones.
  static constexpr long busy_polls = 100;
  static constexpr double poll_seconds = 2e-3;
  static constexpr double short_sleep_seconds = 0.1;
  // A gap between two polls longer than this is the rank's own stall.
  static constexpr double stalled_seconds = 1.0;

  bool finished_in_time(MPI_Request& request, double idle_seconds) const;
  // Ends the job, with the line unless another rank reports; `tell_others`
  // is false off the main thread (MPI is initialised without thread support).
  [[noreturn]] void abort_job(const std::string& waiting_for, bool tell_others = true) const;

  double seconds_;
  int world_rank_;
};

// The watchdog's communicator, a duplicate of the world that Session makes
// after MPI_Init and frees before MPI_Finalize; without it each rank whose
// wait times out reports.
void open_watchdog_notices();
void close_watchdog_notices();

// The watchdog over a blocking call it cannot poll, such as a collective
// HDF5/MPI-IO write (it has no MPI_Request): a thread that ends the job,
// with the watchdog's one line, unless the call returns within `seconds`.
class Deadline {
 public:
  Deadline(const Watchdog& watchdog, double seconds, std::string waiting_for);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable returned_;
  bool done_ = false;
  std::thread guard_;
};

}  // namespace kpipe::comm
