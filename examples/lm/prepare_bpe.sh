#!/usr/bin/env bash
# A SentencePiece BPE model for subword tokens (data.tokenizer =
# "sentencepiece", data.tokenizer_model = PREFIX.model):
#
#   examples/lm/prepare_bpe.sh TEXT PREFIX [VOCAB]   # VOCAB defaults to 4096
#
# Trains with spm_train (Debian's sentencepiece) on the first 90% of the
# characters of TEXT only: the part kpipe's text source trains on, so the
# validation text stays unseen by the tokenizer too. Identity normalisation,
# kept whitespace and byte fallback make decoding the exact inverse of
# encoding (newlines included), so bits per character compare with a
# character model's. Set model.vocab = VOCAB in the deck.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 TEXT PREFIX [VOCAB]" >&2
  exit 2
fi
text=$1
prefix=$2
vocab=${3:-4096}
if [[ ! -f $text ]]; then
  echo "$0: no text file '$text'; make the King James Bible with examples/lm/prepare_kjv.sh" >&2
  exit 2
fi
if ! [[ $vocab =~ ^[0-9]+$ ]] || ((vocab < 64)); then
  echo "$0: VOCAB = '$vocab'; give a vocabulary size of at least 64" >&2
  exit 2
fi
if ! command -v spm_train >/dev/null 2>&1; then
  echo "$0: the command 'spm_train' is missing; install it with: sudo apt-get install sentencepiece" >&2
  exit 1
fi

training=$(mktemp)
trap 'rm -f "$training"' EXIT
# The first floor(0.9 N) characters (code points), as kpipe splits the text.
python3 - "$text" "$training" <<'PY'
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(text[: len(text) * 9 // 10])
PY
spm_train --input="$training" --model_prefix="$prefix" --vocab_size="$vocab" --model_type=bpe \
  --character_coverage=1.0 --normalization_rule_name=identity --remove_extra_whitespaces=false \
  --byte_fallback=true --num_threads="$(nproc)" --minloglevel=2
echo "wrote $prefix.model ($vocab pieces); set data.tokenizer_model = \"$prefix.model\" and model.vocab = $vocab"
