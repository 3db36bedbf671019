#!/usr/bin/env bash
# The character maps spm_train writes pass kpipe's checks of SentencePiece
# model files: a model trained on genesis.txt with each of the library's
# precompiled normalisers (NFKC and its case-folding variant) tokenizes the
# text and trains two steps. The checks walk each map's double-array trie
# (src/model/data/sentencepiece_model.cpp), so this is the library's own
# layout, not a hand-built one, passing them.
#   sentencepiece_normalisers.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
if ! command -v spm_train >/dev/null; then
  echo "spm_train is missing; install Debian's sentencepiece (scripts/install-deps.sh)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for rule in nmt_nfkc nfkc_cf; do
  spm_train --input=tests/data/lm/genesis.txt --model_prefix="$work/$rule" --vocab_size=384 --model_type=bpe \
    --character_coverage=1.0 --normalization_rule_name="$rule" --byte_fallback=true --num_threads=1 \
    --minloglevel=2 >"$work/$rule.train.log" 2>&1 || { echo "spm_train $rule failed"; cat "$work/$rule.train.log"; exit 1; }
  map_bytes=$(wc -c <"$work/$rule.model")
  [ "$map_bytes" -gt 100000 ] || { echo "$rule: a $map_bytes-byte model holds no precompiled map"; exit 1; }
  "$kpipe" run tests/data/lm/genesis-bpe.toml pipeline.stages=1 train.steps=2 \
    "data.tokenizer_model=$work/$rule.model" >"$work/$rule.log" 2>&1 ||
    { echo "kpipe refused the $rule model spm_train wrote"; cat "$work/$rule.log"; exit 1; }
done
echo "sentencepiece normalisers: NFKC and NFKC case-folded models pass the checks and train"
