#pragma once
// The small collectives the runtime and the command line need, over a
// communicator of the process grid. They keep MPI inside comm: everything
// above it speaks in std::vector and doubles (DESIGN.md §2).

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kpipe::comm {

class Watchdog;

// A communicator of the process grid (world, pipeline or data-parallel group).
using Communicator = MPI_Comm;

// From this call on, the collectives below (and broadcast_from_root) wait
// under a watchdog of `seconds`, so that a rank stopped before one of them
// ends the job with the watchdog's line naming `world_rank` and the
// collective; the runtime calls it once the deck is read. Before, they block
// as MPI's own do.
void watch_collectives(double seconds, int world_rank);
// Completes the nonblocking collective `request` under that watchdog (or
// waits for it when none is set); `what` names it ("a barrier").
void complete_collective(MPI_Request& request, const char* what);
// Runs `call`, a blocking collective with no nonblocking form
// (MPI_Comm_split), under that watchdog's deadline (comm::Deadline), if set.
void watched(const char* what, const std::function<void()>& call);

Communicator world();
// This rank alone: a group of one.
Communicator self();
int rank_of(Communicator comm);
int size_of(Communicator comm);

// The ranks of `comm` that pass the same `color` (negative: in none; the
// object is then empty), ordered by `key`, as a communicator that lives as
// long as the object. Collective over `comm`, under the watchdog.
class SubCommunicator {
 public:
  SubCommunicator(Communicator comm, int color, int key);
  ~SubCommunicator();
  SubCommunicator(const SubCommunicator&) = delete;
  SubCommunicator& operator=(const SubCommunicator&) = delete;

  bool empty() const;
  Communicator get() const { return comm_; }

 private:
  Communicator comm_;
};
// Under the watchdog; `what` names it in the watchdog's line.
void barrier(Communicator comm, const char* what = "a barrier");
// Every rank's host name (MPI_Get_processor_name), in rank order: ranks
// that share one are on one node (also hosts that share one machine's
// kernel, as network namespaces do). Gathered under the watchdog, where
// MPI_Comm_split_type would block unwatched.
std::vector<std::string> host_names(Communicator comm);
// Seconds on a clock every rank reads alike (MPI_Wtime).
double wall_time();

double sum(Communicator comm, double value);
double max(Communicator comm, double value);
std::vector<std::int64_t> sum(Communicator comm, const std::vector<std::int64_t>& values);

// `values` of rank `root` on every rank of `comm`; every rank passes a vector
// of the same size (float, double or int).
template <class T>
void broadcast(Communicator comm, int root, std::vector<T>& values);
// As broadcast (int), the wait watched by `watchdog` with `idle_seconds` of
// grace before its time counts: a root that may rightly have nothing to send
// yet (a serving lead waiting for a request trace's next arrival).
void broadcast(Communicator comm, int root, std::vector<int>& values, const Watchdog& watchdog, double idle_seconds);

// Rank `root`'s `text` on every rank of `comm` (what the others pass is
// ignored); `what` names it in the watchdog's line.
std::string broadcast(Communicator comm, int root, const std::string& text, const char* what = "a broadcast of text");
// Every rank's `mine`, in rank order, on every rank; lengths may differ.
// Throws std::length_error on every rank alike beyond INT_MAX bytes in all.
std::vector<std::string> all_gather(Communicator comm, const std::string& mine, const char* what = "a gather of text");
// Every rank's `mine`, rank after rank; every rank must give the same count.
std::vector<int> all_gather(Communicator comm, const std::vector<int>& mine);
std::vector<double> all_gather(Communicator comm, const std::vector<double>& mine);
// `bytes` of `mine` from every rank into `all` (size(comm) · bytes), rank after rank.
void all_gather(Communicator comm, const unsigned char* mine, std::size_t bytes, unsigned char* all);
// The rows of a row-major matrix of `columns` columns at `data` (host
// memory) that rank r of `comm` holds, [first[r], first[r + 1]), on every
// rank, in place (first has size(comm) + 1 entries). Counts travel in rows,
// so a matrix beyond INT_MAX elements gathers as long as its rows fit an int.
template <class T>
void all_gather_rows(Communicator comm, T* data, std::int64_t columns, const std::vector<int>& first);
// The same with a count of its own per rank; `counts` (optional) gets them.
std::vector<double> all_gather_varying(Communicator comm, const std::vector<double>& mine,
                                       std::vector<int>* counts = nullptr);
// The same when every rank already knows every rank's count (one collective, not two).
std::vector<double> all_gather_varying(Communicator comm, const std::vector<double>& mine,
                                       const std::vector<int>& counts);
// Every rank's `mine` on rank 0, rank after rank (equal counts); empty elsewhere.
std::vector<double> gather_to_root(Communicator comm, const std::vector<double>& mine);
// The same with a count of its own per rank; on rank 0 `counts` (optional)
// gets them. Throws std::length_error beyond INT_MAX values (MPI's counts),
// on every rank alike.
std::vector<double> gather_varying_to_root(Communicator comm, const std::vector<double>& mine,
                                           std::vector<int>* counts = nullptr);

}  // namespace kpipe::comm
