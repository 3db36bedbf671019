#!/usr/bin/env bash
# Every reader refuses a FIFO at once, with exit code 2 and one error line,
# instead of waiting for a writer forever: data.path (text and HDF5),
# checkpoint.restart, --costs (a run's and a serve run's), a request trace and
# a profile.
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fifo="$work/fifo"
mkfifo "$fifo"
failed=0

refused() {
  local name=$1 output code lines
  shift
  output=$(timeout 30 "$kpipe" "$@" 2>&1 >/dev/null)
  code=$?
  lines=$(printf '%s\n' "$output" | grep -c '^kpipe: error:')
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "$name: exit code $code, $lines error lines (want 2 and 1): $output"
    failed=1
  else
    echo "$name: ${output#kpipe: error: }"
  fi
}

refused "text data" run inputs/kjv-char.toml pipeline.stages=1 data.path="$fifo" checkpoint.every=0 train.eval_every=0
refused "HDF5 dataset" run inputs/digits.toml pipeline.stages=1 data.path="$fifo" checkpoint.every=0
refused "restart checkpoint" run inputs/quickstart.toml pipeline.stages=1 checkpoint.restart="$fifo"
refused "run costs" plan inputs/quickstart.toml --costs "$fifo"
refused "request trace" plan tests/data/lm/genesis.toml requests="$fifo"
refused "served request trace" serve tests/data/lm/genesis.toml pipeline.stages=1 requests="$fifo"
refused "serve costs" plan tests/data/lm/genesis.toml requests=tests/data/serve/text.jsonl --costs "$fifo"
refused "profile" trace "$fifo"
[ "$failed" -eq 0 ] && echo "every reader refused the FIFO"
exit "$failed"
