# shellcheck shell=bash
# Sourced by the Slurm job scripts: the checks and the launch they share.
#
# run_preemptible KPIPE DECK [ARG ...] -- [SRUN_OPTION ...]
#   Refuses, in one line and with exit code 2, an allocation whose task count
#   is not the deck's p * t * d. Then srun starts the ranks: srun, not mpirun,
#   because Slurm then places, binds and signals every rank itself
#   (scancel --signal and --signal reach each rank, not a launcher daemon), and
#   Open MPI wires up through PMIx (--mpi=pmix; Debian's Open MPI and Slurm
#   both speak it). kpipe runs with checkpoint.restart = "latest" (an override
#   on the command line wins). On SIGUSR1 (--signal=USR1@120 before the time
#   limit, or scancel --signal=USR1) kpipe writes a checkpoint at the next
#   step boundary and exits 3 (runtime.preempt_signals): the job then requeues
#   itself, and the next start resumes from that checkpoint.
# shellcheck source=examples/jobs/deck-ranks.sh
source "$(dirname "${BASH_SOURCE[0]}")/deck-ranks.sh"

run_preemptible() {
  local kpipe=$1 deck=$2
  shift 2
  local args=() srun_options=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  srun_options=("$@")
  local ranks
  ranks=$(deck_ranks "$kpipe" "$deck" "${args[@]}")
  if [ "$ranks" != "$SLURM_NTASKS" ]; then
    echo "$deck needs $ranks MPI ranks (pipeline.stages * tensor_parallel * data_parallel) but job $SLURM_JOB_ID" \
      "has $SLURM_NTASKS tasks; submit it with --ntasks=$ranks" >&2
    exit 2
  fi
  echo "kpipe: job $SLURM_JOB_ID, start $((${SLURM_RESTART_COUNT:-0} + 1)), $ranks ranks on $SLURM_JOB_NODELIST"
  # --kill-on-bad-exit: one failed rank ends the job instead of leaving the
  # others waiting (kpipe's watchdog is the second line of defence).
  local code=0
  srun --mpi=pmix --kill-on-bad-exit=1 "${srun_options[@]}" \
    "$kpipe" run "$deck" checkpoint.restart=latest "${args[@]}" || code=$?
  if [ "$code" -eq 3 ]; then
    echo "kpipe: job $SLURM_JOB_ID preempted after a checkpoint; requeued to resume from it"
    scontrol requeue "$SLURM_JOB_ID"
  fi
  exit "$code"
}
