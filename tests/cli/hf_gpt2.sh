#!/usr/bin/env bash
# Hugging Face GPT-2 interop (kpipe export / import, docs/formats.md): a model
# trained by kpipe on 2 ranks (its LM head tied to the token table, and not),
# exported, loads in transformers' GPT2LMHeadModel and its loss on the
# validation windows equals `kpipe infer`'s within 1e-4; a GPT-2 written by
# PyTorch (save_pretrained, tied head, gelu_new) imports and `kpipe infer` on
# 2 ranks reproduces PyTorch's loss within 1e-4.
#
# transformers and safetensors come from PyPI into a virtual environment
# (hf_venv.sh); skipped (77) with the reason where they cannot be installed.
set -uo pipefail
mpiexec=$1 kpipe=$2 venv=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(dirname "$0")
text=tests/data/lm/genesis.txt

# shellcheck source=tests/cli/hf_venv.sh
source "$here/hf_venv.sh"
hf() { "$venv/bin/python" "$here/hf_gpt2.py" "$@"; }

# kpipe -> transformers: GPT-2's head (no bias) and GELU, tied to the token table (GPT-2) or not.
for tie in true false; do
  keys=(model.head_bias=false model.activation=gelu_tanh "model.tie_embeddings=$tie")
  "$mpiexec" -n 2 "$kpipe" run tests/data/lm/genesis.toml "${keys[@]}" train.steps=60 train.lr=0.01 \
    checkpoint.every=60 checkpoint.path="$work/trained-$tie" >"$work/run.log" 2>&1 ||
    { echo "training failed"; tail -n 20 "$work/run.log"; exit 1; }
  "$mpiexec" -n 2 "$kpipe" infer tests/data/lm/genesis.toml "${keys[@]}" \
    checkpoint.restart="$work/trained-$tie/step-60.h5" --json "$work/infer.json" >"$work/infer.log" 2>&1 ||
    { echo "infer failed"; tail -n 20 "$work/infer.log"; exit 1; }
  "$kpipe" export "$work/trained-$tie/step-60.h5" "$work/exported-$tie" | grep "^export:" ||
    { echo "export failed"; exit 1; }
  hf loss "$work/exported-$tie" "$text" 16 8 "$(mean_loss "$work/infer.json")" ||
    { echo "exported model (tie_embeddings = $tie): losses differ"; exit 1; }
done

# PyTorch -> kpipe.
torch_loss=$(hf make "$work/pytorch" "$text" 16 8) || { echo "writing the PyTorch model failed"; exit 1; }
"$kpipe" import "$work/pytorch" "$work/imported" | grep "^import:" || { echo "import failed"; exit 1; }
"$mpiexec" -n 2 "$kpipe" infer "$work/imported/model.toml" data.source=text data.path="$text" train.global_batch=8 \
  train.microbatch_size=2 pipeline.stages=2 --json "$work/imported.json" >"$work/imported.log" 2>&1 ||
  { echo "infer of the imported model failed"; tail -n 20 "$work/imported.log"; exit 1; }
kpipe_loss=$(mean_loss "$work/imported.json")
echo "imported model: PyTorch loss $torch_loss, kpipe infer $kpipe_loss"
/usr/bin/python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-4)" "$torch_loss" "$kpipe_loss" ||
  { echo "imported model: losses differ by more than 1e-4"; exit 1; }
echo "GPT-2 interop: export and import match transformers within 1e-4"
