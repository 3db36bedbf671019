#pragma once
// MPI and Kokkos lifetime for the kpipe executable: initialised once, and
// finalised in the right order on every path out of main, errors included.

#include <exception>
#include <string>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/session.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::runtime {

class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int rank() const { return mpi_.rank(); }
  int size() const { return mpi_.size(); }

  // "Kokkos 3.4.1 Serial (concurrency 1), MPI 2 ranks" for the banner.
  std::string describe() const;

 private:
  comm::Session mpi_;  // first in, last out: MPI outlives Kokkos
};

// Errors during the steps of a run may strike one rank only; the others would
// wait for it forever. The failing rank reports "kpipe: error: rank R: ..."
// and ends the whole job with the error's exit code — unless every rank has
// agreed on the error (comm::AgreedError), which then ends the job cleanly.
template <class Work>
auto abort_on_error(Work&& work) {
  try {
    return work();
  } catch (const comm::AgreedError&) {
    throw;
  } catch (const Error& e) {
    comm::abort_job(e, e.exit_code());
  } catch (const std::exception& e) {
    const Error error = error_of_failure(e, "the run");
    comm::abort_job(error, error.exit_code());
  }
}

}  // namespace kpipe::runtime
