#include "kpipe/core/signals.hpp"

#include <csignal>

namespace kpipe {

const std::vector<NamedSignal>& preemption_signals() {
  static const std::vector<NamedSignal> signals = {
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"INT", SIGINT}, {"HUP", SIGHUP}};
  return signals;
}

std::string signal_name(int number) {
  for (const NamedSignal& signal : preemption_signals()) {
    if (signal.number == number) return std::string("SIG") + signal.name;
  }
  return "signal " + std::to_string(number);
}

}  // namespace kpipe
