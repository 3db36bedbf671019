#!/usr/bin/env bash
# train.post_validation end to end (docs/runtime.md): a 2-rank zb-h2 run that
# clips at a tight norm, so updates are rolled back and redone, must report
# the same losses and write the same checkpoints (weights and optimizer
# state, mid-run and at the end) as the synchronous run, and a post-validated
# run resumed from its mid-run checkpoint must end on the same weights.
set -uo pipefail
mpiexec=$1 kpipe=$2 h5diff=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(run inputs/quickstart.toml pipeline.schedule=zb-h2 train.grad_clip=0.5 train.steps=12 checkpoint.every=6)

"$mpiexec" -n 2 "$kpipe" "${run[@]}" checkpoint.path="$work/sync" --json "$work/sync.json" >"$work/sync.log" 2>&1 ||
  { echo "the synchronous run failed"; tail -n 20 "$work/sync.log"; exit 1; }
"$mpiexec" -n 2 "$kpipe" "${run[@]}" train.post_validation=true checkpoint.path="$work/post" --json "$work/post.json" \
  >"$work/post.log" 2>&1 || { echo "the post-validated run failed"; tail -n 20 "$work/post.log"; exit 1; }
grep "^post-validation:" "$work/post.log"
grep -Eq "^post-validation: [1-9][0-9]* of 12 updates rolled back" "$work/post.log" ||
  { echo "no update was rolled back: the test no longer reaches the roll-back"; exit 1; }

for step in 6 12; do
  for group in /parameters /optimizer; do
    "$h5diff" "$work/post/step-$step.h5" "$work/sync/step-$step.h5" "$group" "$group" ||
      { echo "step $step: $group of the post-validated run differ from the synchronous run's"; exit 1; }
  done
done
# shellcheck source=tests/support/json_losses.sh
source "$(dirname "$0")/../support/json_losses.sh"
[ "$(losses "$work/post.json")" = "$(losses "$work/sync.json")" ] ||
  { echo "losses differ: post-validated $(losses "$work/post.json"), synchronous $(losses "$work/sync.json")"; exit 1; }

mkdir -p "$work/resumed"
"$mpiexec" -n 2 "$kpipe" "${run[@]}" train.post_validation=true checkpoint.path="$work/resumed" \
  checkpoint.restart="$work/post/step-6.h5" >"$work/resumed.log" 2>&1 ||
  { echo "the resumed run failed"; tail -n 20 "$work/resumed.log"; exit 1; }
"$h5diff" "$work/resumed/step-12.h5" "$work/sync/step-12.h5" /parameters /parameters ||
  { echo "the resumed post-validated run's weights differ from the synchronous run's"; exit 1; }
echo "post-validated: losses, checkpoints and a resumed run bitwise those of the synchronous run"
