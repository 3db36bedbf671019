#pragma once
// Preemption (runtime.preempt_signals): schedulers warn a job with a signal
// before they end it (Slurm's --signal, a preemption, scancel --signal).
// While a PreemptionSignals lives, those signals only set a flag; kpipe run
// asks at every step boundary whether any rank got one, and if so all ranks
// write a checkpoint and exit with exit_code, to continue with
// checkpoint.restart = "latest" (the Slurm scripts requeue on it). A second
// signal changes nothing: the checkpoint is written once, atomically, so the
// previous one stays whole until the new one is complete.

#include <vector>

namespace kpipe::runtime {

class PreemptionSignals {
 public:
  // The process's exit code after a preempted run wrote its checkpoint.
  static constexpr int exit_code = 3;

  // Catches `signals` (signal numbers) until destroyed, when the previous
  // handlers come back — unless one arrived: the run then ends with
  // exit_code, and a repeated signal must not kill the rank before it does,
  // so they stay caught. At most one instance at a time.
  explicit PreemptionSignals(const std::vector<int>& signals);
  ~PreemptionSignals();
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The signal this rank received first, or 0.
  // Ranks agree on it through runtime::StepLedger, so that all stop after the same step.
  static int received();
};

}  // namespace kpipe::runtime
