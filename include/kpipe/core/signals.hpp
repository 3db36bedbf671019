#pragma once
// The signals a scheduler warns a job with (runtime.preempt_signals), by the
// name a deck gives them: one table for the deck's parser and the messages of
// the run that catches them.

#include <string>
#include <vector>

namespace kpipe {

struct NamedSignal {
  const char* name;  // "USR1"
  int number;        // SIGUSR1
};

// TERM, USR1, USR2, INT and HUP.
const std::vector<NamedSignal>& preemption_signals();

// The table's entry for signal `number`; null for any other.
const NamedSignal* named_signal(int number);

// "SIGUSR1" for a signal of that table, "signal N" for any other.
std::string signal_name(int number);

}  // namespace kpipe
