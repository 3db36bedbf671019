#!/usr/bin/env bash
# Preemption under a real Slurm (tests/slurm/cluster.sh): a 2-rank job of
# examples/jobs/slurm-cpu.sbatch gets SIGUSR1 once training is under way,
# from `scancel --signal=USR1` (every rank: MODE all), on one rank's process
# only (MODE one), or from Slurm itself before the time limit (MODE
# time-limit: --time=2 --signal=USR1@80; slurmctld checks limits every 30 s,
# so the warning comes 10 to 40 s into the run, which lasts longer). kpipe
# writes a checkpoint at the next step boundary and exits 3, the job script
# requeues the job, the next start resumes from checkpoint.restart =
# "latest", and the job completes. Its losses (both starts) and final weights
# are bitwise those of an uninterrupted run.
#   preempt_job.sh CLUSTER_DIR KPIPE H5DIFF all|one|time-limit
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kpipe=$2 h5diff=$3 mode=$4
# shellcheck source=tests/slurm/slurm-env.sh
source "$root/tests/slurm/slurm-env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export KPIPE=$root/tests/slurm/json_per_start.sh KPIPE_REAL=$kpipe KPIPE_JSON_DIR=$work KPIPE_ROOT=$root
steps=30
limits=()
if [ "$mode" = time-limit ]; then
  # The run must outlast the warning's latest 40 s on any machine and GEMM
  # library: as many steps as 75 s hold at the speed of a 40-step run.
  # shellcheck source=scripts/mpi-env.sh
  seconds=$(source "$root/scripts/mpi-env.sh" &&
    mpirun -n 2 "$kpipe" run "$root/benchmarks/decks/compute_bound.toml" train.steps=40 2>&1 |
    sed -n 's/^summary: 40 steps in \([0-9.]*\) s.*/\1/p')
  [ -n "$seconds" ] || { echo "the 40-step calibration run of compute_bound.toml failed"; exit 1; }
  steps=$(awk -v s="$seconds" 'BEGIN { print int(40 * 75 / s) + 1 }')
  limits=(--time=2 --signal=USR1@80)
fi
run=("train.steps=$steps" "checkpoint.every=$steps")

job=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 "${limits[@]}" -o "$work/job.out" \
  "$root/examples/jobs/slurm-cpu.sbatch" "$root/benchmarks/decks/compute_bound.toml" "${run[@]}" \
  checkpoint.path="$work/preempted")
for _ in $(seq 600); do grep -Eq "^step +3/" "$work/job.out" 2>/dev/null && break; sleep 0.1; done
grep -Eq "^step +3/" "$work/job.out" || { echo "job $job did not reach step 3 in 60 s"; cat "$work/job.out"; exit 1; }
if [ "$mode" = all ]; then
  scancel --signal=USR1 "$job"
elif [ "$mode" = one ]; then
  rank=$(pgrep -f "^$kpipe run .*$work/preempted" | head -n 1)
  [ -n "$rank" ] || { echo "no rank of job $job to signal"; exit 1; }
  kill -USR1 "$rank"
fi
# Slurm holds a requeued job for 120 s (its BeginTime), time for the previous
# start's step daemons to finish; 10 s are enough on this one node. The
# time-limit job's next start gets time to finish.
for _ in $(seq 1200); do
  [ "$(job_field "$job" Restarts)" = 1 ] && [ "$(job_field "$job" JobState)" = PENDING ] && break
  sleep 0.1
done
[ "$(job_field "$job" Restarts)" = 1 ] || { echo "job $job was not requeued in 120 s"; cat "$work/job.out"; exit 1; }
scontrol update JobId="$job" StartTime=now+10 ${limits:+TimeLimit=10}
state=$(wait_for_end "$job" 240)
cat "$work/job.out"
[ "$state" = COMPLETED ] || { echo "job $job ended $state, not COMPLETED"; exit 1; }
[ "$(job_field "$job" Restarts)" = 1 ] || { echo "job $job started $(job_field "$job" Restarts) more times, not 1"; exit 1; }
grep -q "preempted after a checkpoint; requeued" "$work/job.out" || { echo "job $job was not requeued"; exit 1; }

source "$root/scripts/mpi-env.sh"
mpirun -n 2 "$kpipe" run "$root/benchmarks/decks/compute_bound.toml" "${run[@]}" checkpoint.path="$work/whole" \
  --json "$work/whole.json" >"$work/whole.log" 2>&1 || { echo "the uninterrupted run failed"; exit 1; }
"$h5diff" "$work/preempted/step-$steps.h5" "$work/whole/step-$steps.h5" /parameters /parameters ||
  { echo "the requeued job's weights differ from the uninterrupted run's"; exit 1; }
combined="$(losses "$work/start-0.json"),$(losses "$work/start-1.json")"
[ "$combined" = "$(losses "$work/whole.json")" ] || {
  echo "losses differ: preempted and requeued $combined, uninterrupted $(losses "$work/whole.json")"
  exit 1
}
step=$(grep -m 1 "^preempted:" "$work/job.out" | grep -Eo "after step [0-9]+" || true)
echo "Slurm job of $steps steps preempted (SIGUSR1: $mode${step:+, $step}), requeued, resumed: losses and weights bitwise an uninterrupted run's"
