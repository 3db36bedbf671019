#!/usr/bin/env bash
# compute.precision = "fp16" with dynamic loss scaling (docs/model.md,
# Precision), end to end on 2 ranks. A first scale of 2^30 overflows float16:
# the first steps are skipped on every rank, each halving the scale
# (hysteresis 1), until the gradients fit; a window of 3 then doubles it
# again, and overflows follow. The --json summary holds every step's scale
# and the skipped steps, the log one line per overflow. A run resumed from
# its mid-run checkpoint continues the scale history and ends on the
# uninterrupted run's weights and losses, bitwise. A static scale that
# overflows cannot be lowered: with train.on_nonfinite = "stop" the run ends
# before the update with one line, and writes nothing.
set -uo pipefail
mpiexec=$1 kpipe=$2 h5diff=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(run inputs/quickstart.toml compute.precision=fp16 train.initial_loss_scale=1073741824
  train.loss_scale_hysteresis=1 train.loss_scale_window=3 train.steps=12 checkpoint.every=6)

# The "NAME": [ ... ] array of a --json report as one comma-separated line.
array() { sed -n "/\"$2\"/,/\]/p" "$1" | tr -d ' \n' | sed "s/\"$2\":\[//; s/\].*//"; }

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/whole" --json "$work/whole.json" >"$work/whole.log" 2>&1 ||
  { echo "the fp16 run failed"; tail -n 20 "$work/whole.log"; exit 1; }
grep -E "overflowed|^updates:|^loss scale:" "$work/whole.log"
history=$(array "$work/whole.json" history)
skipped=$(array "$work/whole.json" skipped_steps)
echo "scale history: $history; skipped steps: $skipped"
[ "${history%%,*}" = "1073741824.0" ] || { echo "the first step did not run at the initial scale"; exit 1; }
grep -q "^step 1: a loss or gradient overflowed float16 at loss scale 1073741824; the update is skipped, the scale is now 536870912" \
  "$work/whole.log" || { echo "the first step's overflow was not skipped and halved"; exit 1; }
[ "$(grep -c "overflowed float16" "$work/whole.log")" -eq "$(echo "$skipped" | tr ',' '\n' | grep -c .)" ] ||
  { echo "the log's overflows and the summary's skipped steps disagree"; exit 1; }
grep -q "^updates: [1-9][0-9]* of 12 steps skipped (float16 overflows)" "$work/whole.log" ||
  { echo "no skipped-updates summary"; exit 1; }
# Some step ran and updated: the scale grew back at least once after falling.
echo "$history" | tr ',' '\n' | awk 'NR > 1 && $1 > previous { grew = 1 } { previous = $1 } END { exit !grew }' ||
  { echo "the scale never grew after a window of good steps"; exit 1; }

mkdir -p "$work/resumed"
"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/resumed" checkpoint.restart="$work/whole/step-6.h5" \
  --json "$work/resumed.json" >"$work/resumed.log" 2>&1 ||
  { echo "the resumed run failed"; tail -n 20 "$work/resumed.log"; exit 1; }
[ "$(array "$work/resumed.json" history)" = "$(echo "$history" | cut -d, -f7-)" ] ||
  { echo "resumed scales $(array "$work/resumed.json" history), not the last six of $history"; exit 1; }
[ "$(array "$work/resumed.json" losses)" = "$(array "$work/whole.json" losses | cut -d, -f7-)" ] ||
  { echo "the resumed run's losses differ from the uninterrupted run's"; exit 1; }
"$h5diff" "$work/resumed/step-12.h5" "$work/whole/step-12.h5" /parameters /parameters ||
  { echo "the resumed run's weights differ from the uninterrupted run's"; exit 1; }

"$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml compute.precision=fp16 train.loss_scale=1073741824 \
  train.steps=3 checkpoint.every=1 checkpoint.path="$work/static" >"$work/static.log" 2>&1
code=$?
grep "cannot be lowered" "$work/static.log"
[ "$code" -ne 0 ] || { echo "an overflow at a static scale did not stop the run"; exit 1; }
[ "$(grep -c "cannot be lowered further; the run stops before the step's update" "$work/static.log")" -eq 1 ] ||
  { echo "not one line naming the overflow"; tail -n 20 "$work/static.log"; exit 1; }
[ -z "$(ls -A "$work/static" 2>/dev/null)" ] || { echo "the stopped run wrote a checkpoint"; exit 1; }
echo "fp16: overflows skipped and scaled back, the scale history resumed bitwise, a static overflow stopped"
