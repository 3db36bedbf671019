#!/usr/bin/env bash
# Preemption signals at any moment: a rank is stopped (KPIPE_FAULT) as the
# world is split into the grid's groups (grid-stall, set-up), as it reads the
# checkpoint it restarts from (restart-stall) or half-way through a checkpoint
# write (checkpoint-stall, every write); then that rank gets SIGTERM once or
# SIGUSR1 twice, or both ranks get SIGTERM, and it continues. Every job must end with exit
# code 3 after writing a checkpoint, and the run restarted from it with
# checkpoint.restart = "latest" must finish with losses bitwise those of a run
# never interrupted: no signal kills a rank or loses a complete checkpoint.
# Usage: signal_matrix.sh MPIEXEC KPIPE
set -uo pipefail
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/support/json_losses.sh
source "$(dirname "$0")/../support/json_losses.sh"
# shellcheck source=tests/support/stopped.sh
source "$(dirname "$0")/../support/stopped.sh"
run=(run inputs/quickstart.toml train.steps=8 checkpoint.every=2 checkpoint.restart=latest)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/whole" --json "$work/whole.json" >"$work/whole.log" 2>&1 ||
  { echo "the uninterrupted run failed"; tail -n 20 "$work/whole.log"; exit 1; }
expected=$(losses "$work/whole.json")

for phase in grid-stall restart-stall checkpoint-stall; do
  for cell in "0 TERM" "1 TERM" "0 USR1,USR1" "1 USR1,USR1" "1 TERM both"; do
    read -r rank signals both <<<"$cell"
    case="$phase, rank $rank, ${both:+both ranks, }$signals"
    dir="$work/${phase}-${rank}-${signals/,/-}${both:+-both}"
    combined=""
    if [ "$phase" = restart-stall ]; then
      "$mpiexec" -n 2 "$kpipe" "${run[@]}" train.steps=2 checkpoint.path="$dir" --json "$dir.prior.json" \
        >"$dir.prior.log" 2>&1 || { fail "$case: the run before the restart failed"; continue; }
      combined="$(losses "$dir.prior.json"),"
    fi
    KPIPE_FAULT="$rank:$phase" "$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$dir" --json "$dir.first.json" \
      >"$dir.first.log" 2>&1 &
    job=$!
    if ! stopped=$(stopped_among 20 pgrep -P "$job"); then
      fail "$case: no rank stopped"
      kill "$job"
      wait "$job"
      continue
    fi
    targets=("$stopped")
    [ -n "$both" ] && mapfile -t targets < <(pgrep -P "$job")
    IFS=, read -ra each <<<"$signals"
    for signal in "${each[@]}"; do kill "-$signal" "${targets[@]}"; done
    # checkpoint-stall stops the rank in every write, the preemption's too: go on each time.
    while kill -0 "$job" 2>/dev/null; do
      pkill -CONT -P "$job"
      sleep 0.1
    done
    wait "$job"
    code=$?
    [ "$code" -eq 3 ] || { fail "$case: exit code $code, not 3: $(grep -E "error|preempt" "$dir.first.log")"; continue; }
    "$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$dir" --json "$dir.second.json" >"$dir.second.log" 2>&1 ||
      { fail "$case: the restarted run failed: $(grep error "$dir.second.log")"; continue; }
    combined+="$(losses "$dir.first.json"),$(losses "$dir.second.json")"
    [ "$combined" = "$expected" ] || { fail "$case: losses $combined, uninterrupted $expected"; continue; }
    echo "$case: exit 3, restarted bitwise ($(grep -c . <<<"${combined//,/$'\n'}") steps)"
  done
done
echo "$failures failures"
[ "$failures" -eq 0 ]
