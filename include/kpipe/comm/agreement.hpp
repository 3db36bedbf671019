#pragma once
// Collective failure handling (issue: reliability). A phase that every rank
// runs on its own — building its stages, checking its memory, tearing down —
// may fail on one rank only; the others would walk into the next collective
// and wait for it forever. `collectively` runs the phase on every rank and
// then agrees on its outcome: if any rank threw, every rank throws the same
// kpipe::Error (the lowest failing rank's message and exit code), so the job
// ends with one line, one exit code and a clean MPI_Finalize instead of a hang
// or an MPI_ABORT banner. The agreement itself waits under the watchdog, so a
// rank that has vanished still ends the job (with MPI_Abort) within its limit.

#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/watchdog.hpp"

#include "kpipe/core/error.hpp"

namespace kpipe::comm {

// The error every rank throws alike after an agreement: callers may end the
// job collectively (return the exit code, MPI_Finalize) instead of aborting.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// Every rank calls this once per phase with its own outcome (nullptr: done).
// Returns when every rank succeeded; otherwise throws on every rank. The
// message names the failing rank when not every rank failed alike.
void agree(Communicator comm, const Watchdog& watchdog, const std::string& phase, std::exception_ptr failure);

// Inside a phase that `collectively` runs, a point every rank reaches before
// the phase goes on into a collective (a communicator split, say): a rank that
// failed earlier in the phase meets it with the phase's closing agreement, so
// the others stop here with its error instead of waiting in the collective.
// The phase's communicator and name.
class AgreementPoint {
 public:
  AgreementPoint(Communicator comm, const Watchdog& watchdog, const std::string& phase) {
    agree(comm, watchdog, phase, nullptr);
  }
};

// An AgreedError inside `work` comes from an agreement over `comm` (an
// AgreementPoint, or a nested `collectively`): every rank throws it already,
// so it passes on without a second agreement, which the others would not join.
template <class Work>
auto collectively(Communicator comm, const Watchdog& watchdog, const std::string& phase, Work&& work) {
  using Result = decltype(work());
  if constexpr (std::is_void_v<Result>) {
    std::exception_ptr failure;
    try {
      work();
    } catch (const AgreedError&) {
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    agree(comm, watchdog, phase, failure);
  } else {
    std::exception_ptr failure;
    Result result{};
    try {
      result = work();
    } catch (const AgreedError&) {
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    agree(comm, watchdog, phase, failure);
    return result;
  }
}

}  // namespace kpipe::comm
