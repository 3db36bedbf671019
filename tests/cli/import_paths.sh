#!/usr/bin/env bash
# `kpipe import` with hostile paths: a source and a CHECKPOINT_DIR whose names
# hold a quote, a newline and a would-be deck line give a model.toml that
# parses to exactly the keys kpipe meant (checkpoint.restart names the file,
# no injected train.steps); a model.toml that is a directory is refused in
# one line, exit 2, before step-0.h5 is written.
#   import_paths.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
hostile=$'a"b\ntrain.steps = 7\n#c'
mkdir -p "$work/src"
cp -r tests/data/llama/tiny "$work/src/$hostile"
"$kpipe" import "$work/src/$hostile" "$work/out$hostile" >"$work/import.log" 2>&1 ||
  { echo "the import failed"; cat "$work/import.log"; exit 1; }
deck="$work/out$hostile/model.toml"
"$kpipe" deck "$deck" >"$work/deck.log" 2>&1 || { echo "the generated deck does not parse"; cat "$work/deck.log"; exit 1; }
if grep -q "^train.steps" "$deck"; then echo "a directory name injected a deck key"; cat "$deck"; exit 1; fi
grep -qF 'checkpoint.restart = "' "$deck" || { echo "no checkpoint.restart"; exit 1; }
mkdir -p "$work/taken/model.toml"
"$kpipe" import tests/data/llama/tiny "$work/taken" >"$work/taken.log" 2>&1
status=$?
[ "$status" -eq 2 ] || { echo "model.toml as a directory: exit $status, not 2"; cat "$work/taken.log"; exit 1; }
[ "$(grep -c "kpipe: error:" "$work/taken.log")" -eq 1 ] || { echo "not one error line"; cat "$work/taken.log"; exit 1; }
[ ! -e "$work/taken/step-0.h5" ] || { echo "step-0.h5 was written before the refusal"; exit 1; }
echo "import paths: quoted in the deck, and an unwritable model.toml refused before any write"
