#!/usr/bin/env bash
# Signals while a checkpoint is being written (runtime.preempt_signals). A
# 2-rank run of the compute-bound deck checkpoints every 10 steps; rank 1 stops
# half-way through each write (KPIPE_FAULT=1:checkpoint-stall, test-only), so
# the test acts while a write is open:
#  1. the periodic write of step 10 is let go on;
#  2. from step 12 every rank gets SIGUSR1; during the preemption checkpoint
#     that follows, every rank gets a second signal (SIGTERM), which must not
#     end them, and then the job is killed (SIGKILL, as Slurm's after its
#     KillWait): no newer step-N.h5 appears and step-10.h5 stays whole;
#  3. run again with checkpoint.restart = "latest", it resumes from step 10,
#     names the unfinished write the kill left (and leaves it), and its losses
#     and final weights are bitwise an uninterrupted run's.
set -uo pipefail
# shellcheck source=tests/support/stopped.sh
source "$(dirname "$0")/../support/stopped.sh"
mpiexec=$1 kpipe=$2 h5diff=$3
work=$(mktemp -d)
job=""
trap '[ -n "$job" ] && kill -KILL "$job" 2>/dev/null; pkill -KILL -f "$work/interrupted"; rm -rf "$work"' EXIT
run=(run benchmarks/decks/compute_bound.toml train.steps=30 checkpoint.every=10 checkpoint.restart=latest)

ranks() { pgrep -f "^$kpipe run .*$work/interrupted"; }
fail() {
  echo "$1"
  tail -n 20 "$work/first.log"
  exit 1
}

KPIPE_FAULT=1:checkpoint-stall "$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/interrupted" \
  >"$work/first.log" 2>&1 &
job=$!
rank=$(stopped_among 60 ranks) || fail "rank 1 did not stop in the write of step 10"
kill -CONT "$rank"
for _ in $(seq 600); do grep -q "^step 12/" "$work/first.log" && break; sleep 0.1; done
grep -q "^step 12/" "$work/first.log" || fail "the run did not reach step 12"
for pid in $(ranks); do kill -USR1 "$pid"; done
rank=$(stopped_among 60 ranks) || fail "rank 1 did not stop in the preemption checkpoint's write"
for pid in $(ranks); do kill -TERM "$pid"; done
sleep 1
[ "$(ranks | wc -l)" -eq 2 ] || fail "a second signal during the checkpoint write ended a rank"
for pid in $(ranks); do kill -KILL "$pid"; done
kill -KILL "$job"
wait "$job" 2>/dev/null
job=""
ls "$work/interrupted"
newer=$(find "$work/interrupted" -name 'step-*.h5' ! -name step-10.h5)
[ -z "$newer" ] || fail "a checkpoint killed half-way was renamed into place: $newer"

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/interrupted" --json "$work/resumed.json" \
  >"$work/resumed.log" 2>&1 || { tail -n 20 "$work/resumed.log"; fail "the resumed run failed"; }
grep "^weights:" "$work/resumed.log"
grep -q "^weights: .*step-10.h5 after 10 steps" "$work/resumed.log" || fail "the run did not resume from step-10.h5"
grep -q "holds 1 unfinished checkpoint write of a job that ended inside it (.*/step-1[0-9].h5.tmp-" "$work/resumed.log" ||
  fail "the resumed run did not name the unfinished write"
"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/whole" --json "$work/whole.json" >"$work/whole.log" 2>&1 ||
  fail "the uninterrupted run failed"
"$h5diff" "$work/interrupted/step-30.h5" "$work/whole/step-30.h5" /parameters /parameters ||
  fail "the resumed run's weights differ from the uninterrupted run's"
# shellcheck source=tests/support/json_losses.sh
source "$(dirname "$0")/../support/json_losses.sh"
last20=$(losses "$work/whole.json" | cut -d, -f11-)
[ "$(losses "$work/resumed.json")" = "$last20" ] ||
  fail "losses differ: resumed $(losses "$work/resumed.json"), uninterrupted steps 11-30 $last20"
echo "killed during its preemption checkpoint: the previous checkpoint survived, the resume used it, bitwise"
