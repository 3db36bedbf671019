#include "kpipe/runtime/preemption.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

#include "kpipe/core/error.hpp"
#include "kpipe/core/signals.hpp"

namespace kpipe::runtime {

namespace {

// Written by the handler, read between steps: the only state a handler may touch.
volatile std::sig_atomic_t first_signal = 0;

extern "C" void remember(int signal) {
  if (first_signal == 0) first_signal = signal;
}

std::map<int, struct sigaction>& previous_handlers() {
  static std::map<int, struct sigaction> handlers;
  return handlers;
}

}  // namespace

PreemptionSignals::PreemptionSignals(const std::vector<int>& signals) {
  if (!previous_handlers().empty()) throw runtime_error("preemption signals are already being caught");
  first_signal = 0;
  struct sigaction action {};
  action.sa_handler = remember;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI and file I/O go on: the run stops at a step boundary
  for (const int signal : signals) {
    struct sigaction previous {};
    if (::sigaction(signal, &action, &previous) != 0) {
      throw runtime_error(fmt::format("cannot catch {}: {}", signal_name(signal), std::strerror(errno)));
    }
    previous_handlers().emplace(signal, previous);
  }
}

PreemptionSignals::~PreemptionSignals() {
  // After a preemption the process is ending: a second signal (a scheduler
  // repeats its warning) must not kill it with the default action before it
  // exits with exit_code, so the signals stay caught.
  if (first_signal == 0) {
    for (const auto& [signal, previous] : previous_handlers()) ::sigaction(signal, &previous, nullptr);
  }
  previous_handlers().clear();
}

int PreemptionSignals::received() { return first_signal; }

}  // namespace kpipe::runtime
