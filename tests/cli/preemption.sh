#!/usr/bin/env bash
# Preemption (runtime.preempt_signals): a 2-rank run of the compute-bound deck
# gets SIGUSR1 on one rank only once training is under way; it must write a
# checkpoint at the next step boundary and exit with code 3. Run again with
# checkpoint.restart = "latest", it resumes there and finishes, and its losses
# and final weights are bitwise those of an uninterrupted run (which starts
# from step 0: "latest" in an empty checkpoint.path). checkpoint.path does not
# exist beforehand: kpipe creates it.
set -uo pipefail
mpiexec=$1 kpipe=$2 h5diff=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(run benchmarks/decks/compute_bound.toml train.steps=30 checkpoint.every=30 checkpoint.restart=latest)

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/preempted/checkpoints" --json "$work/first.json" \
  >"$work/first.log" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "^step  3/" "$work/first.log" && break; sleep 0.1; done
rank=$(pgrep -P "$job" | head -n 1)
[ -n "$rank" ] || { echo "no rank to signal"; cat "$work/first.log"; exit 1; }
kill -USR1 "$rank"
wait "$job"; code=$?
grep -E "preempted|checkpoint:" "$work/first.log"
[ "$code" -eq 3 ] || { echo "the preempted run exited $code, not 3"; tail -n 20 "$work/first.log"; exit 1; }

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/preempted/checkpoints" --json "$work/second.json" \
  >"$work/second.log" 2>&1 || { echo "the resumed run failed"; tail -n 20 "$work/second.log"; exit 1; }
grep "^weights:" "$work/second.log"
"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/whole" --json "$work/whole.json" >"$work/whole.log" 2>&1 ||
  { echo "the uninterrupted run failed"; tail -n 20 "$work/whole.log"; exit 1; }

"$h5diff" "$work/preempted/checkpoints/step-30.h5" "$work/whole/step-30.h5" /parameters /parameters ||
  { echo "the resumed run's weights differ from the uninterrupted run's"; exit 1; }
# shellcheck source=tests/support/json_losses.sh
source "$(dirname "$0")/../support/json_losses.sh"
combined="$(losses "$work/first.json"),$(losses "$work/second.json")"
[ "$combined" = "$(losses "$work/whole.json")" ] || {
  echo "losses differ: preempted and resumed $combined, uninterrupted $(losses "$work/whole.json")"
  exit 1
}
echo "preempted, resumed from latest: losses and weights bitwise those of an uninterrupted run"
