# Sourced by the Hugging Face interop tests (hf_gpt2.sh, hf_llama.sh) with
# $venv and $work set: transformers and safetensors from PyPI into a virtual
# environment over Debian's python3 (which has python3-torch); transformers is
# pinned to 4.38, the last line of releases that supports Debian 12's torch
# 1.13. Exits 77 (skipped) with the reason where that cannot be installed.
# Defines mean_loss FILE: the mean_loss of a `kpipe infer --json` summary.
# shellcheck shell=bash disable=SC2154  # venv and work are the sourcing script's
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "skipped: Debian's python3 has no torch (apt-get install python3-torch)"; exit 77; }
if ! "$venv/bin/python" -c "import transformers, safetensors" 2>/dev/null; then
  { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check "transformers==4.38.2" "safetensors<1"; } >"$work/pip.log" 2>&1 ||
    { echo "skipped: transformers cannot be installed from PyPI: $(tail -n 1 "$work/pip.log")"; exit 77; }
fi
mean_loss() { /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['mean_loss'])" "$1"; }
