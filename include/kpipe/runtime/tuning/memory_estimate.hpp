#pragma once
// How much memory one rank of a run needs, estimated before anything is
// allocated (issue: reliability): parameters, gradients and optimizer state of
// the chunks it holds, the peak of stashed activations its action list
// implies, the boundary buffers in flight, and what the process already uses
// (libraries, MPI, Kokkos). `kpipe plan` prints it per rank; `kpipe run`
// refuses a model that does not fit before allocating it.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/schedule/schedule.hpp"

namespace kpipe::runtime {

struct MemoryEstimate {
  std::int64_t parameters = 0;       // bytes of the weights of this rank's chunks
  std::int64_t gradients = 0;        // training: one gradient per weight
  std::int64_t optimizer_state = 0;  // SGD: momentum; AdamW: two moments
  std::int64_t activations = 0;      // the peak of what F keeps for B/W, walking the action list
  std::int64_t buffers = 0;          // boundary tensors in flight: executor slots, receive window, staging
  std::int64_t workspace = 0;        // the largest temporary of one action (attention's probabilities)
  // compute.gemm = "packed" where it has a backend: each Linear's weight
  // reordered for the forward, and in training its transpose for the input gradient.
  std::int64_t packed_weights = 0;
  // train.post_validation: the weights and optimizer state as they were before the last update.
  std::int64_t previous_update = 0;
  std::int64_t data = 0;      // a text corpus at its peak (token_source.hpp), loaded after the baseline
  std::int64_t baseline = 0;  // resident memory of the process before the model is built

  std::int64_t total() const {
    return parameters + gradients + optimizer_state + activations + buffers + workspace + packed_weights +
           previous_update + data + baseline;
  }
  // "123.4 MiB (parameters 1.0, gradients 1.0, ...)" for messages and reports.
  std::string describe() const;
};

// The estimate for pipeline rank `rank` of `schedule` (training or
// inference), as one rank of a tensor group of `tensor_ranks`: its shards,
// and with spec.stage.sequence_parallel its rows.
MemoryEstimate estimate_memory(const model::TrainerSpec& spec, const schedule::Schedule& schedule, int rank,
                               int tensor_ranks, bool staged, std::int64_t baseline_bytes);

// Resident and peak resident memory of this process (Linux /proc; 0 elsewhere).
std::int64_t resident_bytes();
std::int64_t peak_resident_bytes();
// For a process that measures one run after another (kpipe tune, sweep):
// hands what the allocator holds free back to the system (malloc_trim), and
// starts the peak resident memory afresh from the resident memory
// (/proc/self/clear_refs "5"; false where the kernel refuses), so that each
// run's estimate and peak start from what the process holds.
void release_free_memory();
bool reset_peak_resident();
// What one of `ranks_on_node` ranks may use, and what says so: the smallest
// of the node's available memory (MemAvailable) and its cgroup's memory limit,
// each shared by the node's ranks, and the address space `ulimit -v` leaves
// this process (its limit less what it has mapped but not touched: the
// estimate counts the resident part).
struct MemoryBudget {
  std::int64_t bytes = 0;
  std::string source;  // "the node's available memory shared by its 2 ranks", ...
};
MemoryBudget memory_budget(int ranks_on_node);
// What a run's rank may use: runtime.memory_limit_mib when the deck sets it,
// else memory_budget(ranks_on_node); the source says which, and how to override.
MemoryBudget run_memory_limit(const config::RunConfig& config, int ranks_on_node);

// The cgroup memory limit over this process: the smallest limit from its
// cgroup (named in `proc_self_cgroup`) up to the root of its hierarchy under
// `cgroup_root`, v2's memory.max ("0::/PATH", mounted at the root) or v1's
// memory.limit_in_bytes ("N:memory:/PATH", mounted at `cgroup_root`/memory:
// Slurm's cgroup v1 plugin still sets it on many clusters); 0 when none is set.
std::int64_t cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& cgroup_root);

// Throws an input error naming what the rank needs, what it may use and what
// to change when `estimate` exceeds `limit_bytes`.
void require_fits(const MemoryEstimate& estimate, std::int64_t limit_bytes, const std::string& limit_source);

// The estimate `kpipe run` checks before allocating, per pipeline rank, with
// `baseline_bytes` as what the process holds before any model (kpipe plan:
// its own resident memory, a stand-in for a run's ranks, taken once for all
// the estimates it compares) and the text corpus where the deck reads one.
std::vector<MemoryEstimate> memory_estimates(const config::RunConfig& config, const model::TrainerSpec& spec,
                                             const schedule::Schedule& schedule, std::int64_t baseline_bytes);
// `kpipe plan`'s memory lines: the estimates per pipeline rank (the largest
// alone when there are many).
void log_memory_estimates(const std::vector<MemoryEstimate>& estimates);

}  // namespace kpipe::runtime
