#pragma once
// MPI and Kokkos lifetime for the kpipe executable: initialised once, and
// finalised in the right order on every path out of main, errors included.

#include <mpi.h>

#include <exception>
#include <string>

#include "kpipe/core/error.hpp"

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

// Errors during the steps of a run may strike one rank only; the others would
// wait for it forever. The failing rank reports "kpipe: error: rank R: ..."
// and ends the whole job with the error's exit code.
[[noreturn]] void abort_job(const std::exception& error, int exit_code);

template <class Work>
auto abort_on_error(Work&& work) {
  try {
    return work();
  } catch (const Error& e) {
    abort_job(e, e.exit_code());
  } catch (const std::exception& e) {
    abort_job(e, 1);
  }
}

}  // namespace kpipe::app
