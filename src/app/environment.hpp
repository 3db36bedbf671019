#pragma once
// MPI and Kokkos lifetime for the kpipe executable: initialised once, and
// finalised in the right order on every path out of main, errors included.

#include <mpi.h>

#include <string>

namespace kpipe::app {

class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // "Kokkos 3.4.1 Serial (concurrency 1), MPI 2 ranks" for the banner.
  std::string describe() const;

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Rank 0 reads the deck and broadcasts it, so every rank parses the same text
// even when nodes see different files. A read error reaches every rank, so
// they all fail the same way and only rank 0 reports it.
std::string read_deck_on_root(const std::string& path, MPI_Comm comm);

}  // namespace kpipe::app
