#include "kpipe/core/signals.hpp"

#include <csignal>

namespace kpipe {

const std::vector<NamedSignal>& preemption_signals() {
  static const std::vector<NamedSignal> signals = {
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"INT", SIGINT}, {"HUP", SIGHUP}};
  return signals;
}

const NamedSignal* named_signal(int number) {
  for (const NamedSignal& signal : preemption_signals()) {
    if (signal.number == number) return &signal;
  }
  return nullptr;
}

std::string signal_name(int number) {
  const NamedSignal* signal = named_signal(number);
  return signal ? std::string("SIG") + signal->name : "signal " + std::to_string(number);
}

}  // namespace kpipe
