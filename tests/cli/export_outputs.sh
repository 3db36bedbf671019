#!/usr/bin/env bash
# `kpipe export` keeps the output discipline of --json (core/output_file.hpp):
# it never writes over its own input, a directory or a FIFO at its target's
# name (one line, exit 2, in seconds, nothing left behind), and leaves a
# foreign file at the old temporary name untouched.
#   export_outputs.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=(tests/data/lm/genesis.toml model.kind=llama model.kv_heads=1 model.ffn_dim=24 pipeline.stages=1)
"$kpipe" run "${deck[@]}" train.steps=1 checkpoint.every=1 checkpoint.path="$work/ck" >"$work/run.log" 2>&1 ||
  { echo "training failed"; tail -n 5 "$work/run.log"; exit 1; }
checkpoint="$work/ck/step-1.h5"

# Runs an export that must be refused in one line with exit 2.
refused() {
  local what=$1
  shift
  timeout 20 "$kpipe" export "$@" >"$work/out.log" 2>&1
  local status=$?
  [ "$status" -eq 2 ] || { echo "$what: exit $status, not 2"; cat "$work/out.log"; exit 1; }
  [ "$(grep -c "kpipe: error:" "$work/out.log")" -eq 1 ] || { echo "$what: not one error line"; cat "$work/out.log"; exit 1; }
}

mkdir "$work/in" && cp "$checkpoint" "$work/in/model.safetensors"
refused "over its own input" "$work/in/model.safetensors" "$work/in"
cmp -s "$checkpoint" "$work/in/model.safetensors" || { echo "the input was changed"; exit 1; }

mkdir -p "$work/dir/model.safetensors"
refused "over a directory" "$checkpoint" "$work/dir"
[ "$(find "$work/dir" -mindepth 1 | wc -l)" -eq 1 ] || { echo "a refused export left files"; ls -la "$work/dir"; exit 1; }

mkdir "$work/fifo" && mkfifo "$work/fifo/model.safetensors"
refused "over a FIFO" "$checkpoint" "$work/fifo"

mkdir "$work/foreign" && echo "not kpipe's" >"$work/foreign/model.safetensors.tmp"
"$kpipe" export "$checkpoint" "$work/foreign" >"$work/out.log" 2>&1 || { echo "export failed"; cat "$work/out.log"; exit 1; }
[ "$(cat "$work/foreign/model.safetensors.tmp")" = "not kpipe's" ] || { echo "a foreign file was overwritten"; exit 1; }
echo "export: never over its input, a directory, a FIFO or a foreign file"
