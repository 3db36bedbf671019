# shellcheck shell=bash
# Sourced by the Slurm tests: SLURM_CONF of the cluster tests/slurm/cluster.sh
# started in CLUSTER (the tests' first argument), or exit 77 (skipped) with
# one line when there is none; helpers to follow a job; and losses
# (tests/support/json_losses.sh).
cluster=$1
if [ ! -f "$cluster/up" ] || ! SLURM_CONF=$cluster/slurm.conf sinfo -h >/dev/null 2>&1; then
  echo "no Slurm cluster in $cluster (see the output of the test slurm_cluster_start)"
  exit 77
fi
export SLURM_CONF=$cluster/slurm.conf

# job_field JOB FIELD: one field of `scontrol show job` (JobState, Restarts, ExitCode).
job_field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# wait_for_end JOB SECONDS: waits until the job has ended for good (not
# pending, running or requeued); prints its state.
wait_for_end() {
  local state=""
  for _ in $(seq $(($2 * 10))); do
    state=$(job_field "$1" JobState)
    case $state in
      PENDING | RUNNING | REQUEUED | CONFIGURING | COMPLETING | SUSPENDED) sleep 0.1 ;;
      *) break ;;
    esac
  done
  echo "$state"
}

# shellcheck source=tests/support/json_losses.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/json_losses.sh"
