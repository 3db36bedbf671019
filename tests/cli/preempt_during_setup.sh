#!/usr/bin/env bash
# A preemption signal during set-up — here while rank 0 reads the checkpoint
# it restarts from (KPIPE_FAULT=0:restart-stall stops it there) — and the
# same signal again just after: the job runs one step, writes a checkpoint
# and exits with code 3, as the Slurm scripts expect to requeue it; it is
# never killed by the signal's default action.
# Usage: preempt_during_setup.sh MPIEXEC KPIPE
set -uo pipefail
# shellcheck source=tests/support/stopped.sh
source "$(dirname "$0")/../support/stopped.sh"
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(run inputs/quickstart.toml train.steps=20 checkpoint.path="$work/checkpoints" checkpoint.restart=latest)
"$mpiexec" -n 2 "$kpipe" "${run[@]}" train.steps=2 checkpoint.every=2 >/dev/null 2>&1 ||
  { echo "the first run failed"; exit 1; }

KPIPE_FAULT=0:restart-stall "$mpiexec" -n 2 "$kpipe" "${run[@]}" >"$work/log" 2>&1 &
job=$!
rank=$(stopped_among 10 pgrep -P "$job") || { echo "no rank stopped in its restart"; kill "$job"; cat "$work/log"; exit 1; }
kill -TERM "$rank"
kill -TERM "$rank"
kill -CONT "$rank"
wait "$job"
code=$?
grep -E "preempted|checkpoint:|error" "$work/log"
[ "$code" -eq 3 ] || { echo "exit code $code, not 3"; tail -n 20 "$work/log"; exit 1; }
[ -f "$work/checkpoints/step-3.h5" ] || { echo "no checkpoint after step 3"; ls "$work/checkpoints"; exit 1; }
echo "preempted during set-up: one step, a checkpoint, exit 3"
