"""Writes the malformed GPT-2 directories of tests/cli/bad_inputs.txt
(config.json and model.safetensors each): python3 tests/data/gpt2/make.py

Each holds the config.json of a tiny GPT-2 (vocabulary 4, context 2, width 2,
one layer, one head) and a model.safetensors broken in one way, or a config
kpipe cannot compute the same.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = {"model_type": "gpt2", "vocab_size": 4, "n_positions": 2, "n_embd": 2, "n_layer": 1, "n_head": 1,
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}


def shapes():
    d, inner = 2, 8
    out = {"wte.weight": [4, d], "wpe.weight": [2, d], "ln_f.weight": [d], "ln_f.bias": [d]}
    for name, shape in {"ln_1.weight": [d], "ln_1.bias": [d], "attn.c_attn.weight": [d, 3 * d],
                        "attn.c_attn.bias": [3 * d], "attn.c_proj.weight": [d, d], "attn.c_proj.bias": [d],
                        "ln_2.weight": [d], "ln_2.bias": [d], "mlp.c_fc.weight": [d, inner],
                        "mlp.c_fc.bias": [inner], "mlp.c_proj.weight": [inner, d], "mlp.c_proj.bias": [d]}.items():
        out["h.0." + name] = shape
    return out


def safetensors(tensors, claimed=None):
    header, data = {}, b""
    for name, shape in tensors.items():
        count = 1
        for extent in shape:
            count *= extent
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * count]}
        data += struct.pack(f"<{count}f", *([0.5] * count))
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if claimed is None else claimed) + text + data


def broken(weights, good, bad):
    """`weights` with header text `good` replaced by `bad` (the length stays right)."""
    assert weights.count(good) == 1 and len(good) <= len(bad) + 8
    header_length = struct.unpack("<Q", weights[:8])[0]
    header = weights[8:8 + header_length].replace(good, bad)
    return struct.pack("<Q", len(header)) + header + weights[8 + header_length:]


def write(case, weights, config=CONFIG):
    os.makedirs(os.path.join(HERE, case), exist_ok=True)
    with open(os.path.join(HERE, case, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(HERE, case, "model.safetensors"), "wb") as f:
        f.write(weights)


def main():
    good = safetensors(shapes())
    write("header-claims-2gb", struct.pack("<Q", 2_000_000_000) + good[8:])
    write("header-past-end", safetensors(shapes(), claimed=len(good) + 100))
    write("offsets-out-of-range", broken(good, b'"data_offsets": [0, 32]', b'"data_offsets": [0, 9999]'))
    write("dtype-mismatch", broken(good, b'"F32", "shape": [4, 2]', b'"F16", "shape": [4, 2]'))
    missing = shapes()
    del missing["h.0.mlp.c_fc.bias"]
    write("missing-tensor", safetensors(missing))
    write("activation-swish", good, dict(CONFIG, activation_function="swish"))
    write("epsilon", good, dict(CONFIG, layer_norm_epsilon=1e-6))


if __name__ == "__main__":
    main()
