#!/usr/bin/env bash
# Hugging Face Llama interop (kpipe import / export, docs/formats.md): a
# random LlamaForCausalLM written by transformers (grouped-query attention,
# its weights in shards, untied and tied head) imports, and `kpipe infer` on
# 2 ranks reproduces transformers' loss within 1e-4; a llama trained by
# kpipe on 2 ranks, exported, loads in transformers with `kpipe infer`'s
# loss within 1e-4; greedy `kpipe generate` gives transformers' generate
# tokens for 32 tokens from the same prompt.
#
# transformers and safetensors come from PyPI into a virtual environment
# (hf_venv.sh); skipped (77) with the reason where they cannot be installed.
set -uo pipefail
mpiexec=$1 kpipe=$2 venv=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(dirname "$0")
text=tests/data/lm/genesis.txt
context=64

# shellcheck source=tests/cli/hf_venv.sh
source "$here/hf_venv.sh"
hf() { "$venv/bin/python" "$here/hf_llama.py" "$@"; }
same() { /usr/bin/python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-4)" "$1" "$2"; }
data=(data.source=text data.path="$text" train.global_batch=8 train.microbatch_size=2 pipeline.stages=2)

# transformers -> kpipe, the head untied and tied.
for tie in false true; do
  torch_loss=$(hf make "$work/hf-$tie" "$text" "$context" 8 "$tie") || { echo "writing the Llama failed"; exit 1; }
  ls "$work/hf-$tie/model.safetensors.index.json" >/dev/null || { echo "the Llama was not sharded"; exit 1; }
  "$kpipe" import "$work/hf-$tie" "$work/imported-$tie" | grep "^import:" || { echo "import failed"; exit 1; }
  "$mpiexec" -n 2 "$kpipe" infer "$work/imported-$tie/model.toml" "${data[@]}" --json "$work/imported.json" \
    >"$work/imported.log" 2>&1 || { echo "infer of the imported Llama failed"; tail -n 20 "$work/imported.log"; exit 1; }
  kpipe_loss=$(mean_loss "$work/imported.json")
  echo "imported Llama (tied $tie): transformers loss $torch_loss, kpipe infer $kpipe_loss"
  same "$torch_loss" "$kpipe_loss" || { echo "imported Llama: losses differ by more than 1e-4"; exit 1; }
done

# Greedy generation from the imported (tied) model.
prompt="And God said, Let"
theirs=$(hf generate "$work/hf-true" "$text" "$prompt" 32) || { echo "transformers' generate failed"; exit 1; }
"$kpipe" generate "$work/imported-true/model.toml" "${data[@]}" pipeline.stages=1 prompt="$prompt" tokens=32 \
  temperature=0 >"$work/generate.log" 2>&1 || { echo "kpipe generate failed"; tail -n 20 "$work/generate.log"; exit 1; }
ours=$(grep -F -- "$prompt" "$work/generate.log" | tail -n 1)
echo "greedy: transformers '$theirs', kpipe '$ours'"
[[ "$ours" == "$theirs" ]] || { echo "greedy generations differ"; exit 1; }

# kpipe -> transformers: a llama trained on 2 ranks, exported.
keys=(model.kind=llama model.heads=4 model.kv_heads=2 model.dim=16 model.ffn_dim=24 model.layers=2)
"$mpiexec" -n 2 "$kpipe" run tests/data/lm/genesis.toml "${keys[@]}" train.steps=40 train.lr=0.01 \
  checkpoint.every=40 checkpoint.path="$work/trained" >"$work/run.log" 2>&1 ||
  { echo "training failed"; tail -n 20 "$work/run.log"; exit 1; }
"$mpiexec" -n 2 "$kpipe" infer tests/data/lm/genesis.toml "${keys[@]}" checkpoint.restart="$work/trained/step-40.h5" \
  --json "$work/infer.json" >"$work/infer.log" 2>&1 || { echo "infer failed"; tail -n 20 "$work/infer.log"; exit 1; }
"$kpipe" export "$work/trained/step-40.h5" "$work/exported" | grep "^export:" || { echo "export failed"; exit 1; }
hf loss "$work/exported" "$text" 16 8 "$(mean_loss "$work/infer.json")" ||
  { echo "exported Llama: losses differ"; exit 1; }
echo "Llama interop: import, export and greedy generation match transformers"
