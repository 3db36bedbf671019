#!/usr/bin/env bash
# Grouped-query attention's KV cache in `kpipe plan DECK requests=FILE`: a
# llama with 4 query heads over 1 key/value head caches a quarter of the
# bytes per token of its multi-head twin (kv_heads = 4), and the same
# inference.kv_cache_mib holds four times the blocks. At t = 2 a rank of the
# multi-head twin caches half its heads, but a rank of the grouped one still
# caches the one key/value head that both ranks share.
#   plan_gqa_kv.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
plan() {
  "$kpipe" plan inputs/kjv-serve.toml data.source=synthetic requests=examples/inference/synthetic.jsonl \
    model.kind=llama model.heads=4 "model.kv_heads=$1" "pipeline.tensor_parallel=$2" 2>&1 | grep "^serve plan:" ||
    { echo "the plan with kv_heads = $1, t = $2 failed"; exit 1; }
}
mha=$(plan 4 1) gqa=$(plan 1 1) mha_t2=$(plan 4 2) gqa_t2=$(plan 1 2)

blocks() { sed -E 's/.* ([0-9]+) KV blocks.*/\1/' <<<"$1"; }
bytes() { sed -E 's/.* ([0-9]+) bytes of K and V per token.*/\1/' <<<"$1"; }
echo "kv_heads 4: $(blocks "$mha") blocks, $(bytes "$mha") bytes per token; kv_heads 1: $(blocks "$gqa") blocks, $(bytes "$gqa") bytes per token"
[ "$(($(bytes "$mha") / 4))" -eq "$(bytes "$gqa")" ] || { echo "grouped-query K and V are not a quarter"; exit 1; }
[ "$(($(blocks "$mha") * 4))" -le "$(($(blocks "$gqa") + 3))" ] || { echo "the same MiB does not hold four times the blocks"; exit 1; }
echo "t = 2: kv_heads 4: $(bytes "$mha_t2") bytes per token and rank; kv_heads 1: $(bytes "$gqa_t2")"
[ "$(($(bytes "$mha") / 2))" -eq "$(bytes "$mha_t2")" ] || { echo "t = 2 does not halve the multi-head K and V"; exit 1; }
[ "$(bytes "$gqa")" -eq "$(bytes "$gqa_t2")" ] || { echo "t = 2 ranks do not each cache the shared key/value head"; exit 1; }
echo "grouped-query attention caches heads / kv_heads fewer bytes per token; ranks sharing a key/value head each cache it"
