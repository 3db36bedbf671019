#pragma once
// Fault injection for tests (test-only; documented in docs/runtime.md): the
// environment variable KPIPE_FAULT=RANK:PHASE[:STEP] makes world rank RANK
// throw a runtime error when it reaches PHASE (set-up's phases in order:
// "setup-memory" as it checks its memory estimate, "setup-stages" as it
// builds its stages, "setup-data" as it opens its data source, all before
// set-up's collectives, then "setup-optimizer" as it builds its optimizer and
// "setup-evaluator" as its held-out evaluator is built, after them; "setup"
// at the end of set-up; "restart" as it reads the checkpoint a run restarts
// from; "serve-setup" as kpipe serve sets up its server; "step" —
// at step STEP, default 0 — or "checkpoint"), so tests can prove that a failure on any rank
// in any phase ends the whole job with one line naming that rank;
// "checkpoint-stall" stops the rank (SIGSTOP) half-way through a checkpoint
// write instead, as a hung node would, and "restart-stall" as it starts to
// load the checkpoint a run restarts from, "grid-stall" before the world is
// split into the grid's groups and "finalize-stall" as the job ends (before
// the communication library shuts down); "hdf5-crash" and "hdf5-stall" crash
// (SIGSEGV) or stop the child process that checks each HDF5 file the rank
// reads, as libhdf5 does on some damaged files. Unset, it costs one getenv at
// start-up.

#include <string_view>

namespace kpipe::fault {

// The phases a fault can be injected in.
enum class Phase {
  setup_memory,
  setup_stages,
  setup_data,
  setup_optimizer,
  setup_evaluator,
  setup,
  restart,
  serve_setup,
  step,
  checkpoint,
  checkpoint_stall,
  restart_stall,
  hdf5_crash,
  hdf5_stall,
  grid_stall,
  finalize_stall
};

// Throws kpipe::runtime_error when KPIPE_FAULT names this rank, phase and
// step; an unparsable KPIPE_FAULT is an input error that shows the format.
void inject(Phase phase, int world_rank, int step = 0);

}  // namespace kpipe::fault
