#!/usr/bin/env bash
# The King James Bible as UTF-8 text for a character language model
# (model.kind = "transformer", data.source = "text", data.path = kjv.txt):
#
#   examples/lm/prepare_kjv.sh [OUT]        # OUT defaults to kjv.txt
#
# Reads the whole text with `bible -f "Gen1:1-Rev22:21"` (Debian's bible-kjv),
# strips each verse's reference ("Ge1:1 ", "1Chr3:4 ") and the whitespace
# around it, and writes one verse per line: the same characters as
# examples/data/bible_kjv.py's HDF5 token stream. kpipe's text source takes
# the sorted distinct characters of the whole file as its vocabulary (newline
# included) and trains on the first 90%, so set model.vocab to the vocabulary
# size printed here.
set -euo pipefail

out=${1:-kjv.txt}
if [[ $# -gt 1 ]]; then
  echo "usage: $0 [OUT.txt]" >&2
  exit 2
fi
if ! command -v bible >/dev/null 2>&1; then
  echo "$0: the command 'bible' is missing; install it with: sudo apt-get install bible-kjv" >&2
  exit 1
fi

# Written next to OUT and renamed at the end, so a failed run leaves no half file.
tmp=$(mktemp "${out}.XXXXXX")
trap 'rm -f "$tmp"' EXIT
bible -f "Gen1:1-Rev22:21" |
  sed -E -e 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+[[:space:]]+//' -e 's/^[[:space:]]+//' -e 's/[[:space:]]+$//' -e '/^$/d' \
    >"$tmp"
mv "$tmp" "$out"
trap - EXIT

# Characters are code points (newlines included); the C sort keeps distinct ones distinct.
characters=$(LC_ALL=C.UTF-8 wc -m <"$out")
distinct=$(LC_ALL=C.UTF-8 grep -o . "$out" | LC_ALL=C sort -u | wc -l)
vocabulary=$((distinct + 1)) # grep -o never prints the newline
train=$((characters * 9 / 10))
echo "$out: $characters characters, vocabulary $vocabulary (set model.vocab = $vocabulary)," \
  "$train train / $((characters - train)) validation tokens"
