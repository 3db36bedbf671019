"""Writes the malformed Llama directories of tests/cli/bad_inputs.txt:
python3 tests/data/llama/make.py

Each holds the config.json of a tiny Llama (vocabulary 4, context 2, width
4, one layer, 2 query heads over 1 key/value head, intermediate size 3) and
its weights, broken in one way: a misshapen, missing or doubly named
tensor, a sharded index naming a file outside the directory or one that is
not there, or a config kpipe cannot compute the same; and one good
directory ("tiny").
"""
import importlib.util
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
# The safetensors writer of the GPT-2 cases.
_spec = importlib.util.spec_from_file_location("gpt2_make", os.path.join(HERE, "..", "gpt2", "make.py"))
_gpt2 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gpt2)
safetensors = _gpt2.safetensors
broken = _gpt2.broken
CONFIG = {"model_type": "llama", "vocab_size": 4, "max_position_embeddings": 2, "hidden_size": 4,
          "intermediate_size": 3, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
          "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False}


def shapes():
    d, kv, ffn = 4, 2, 3
    out = {"model.embed_tokens.weight": [4, d], "model.norm.weight": [d], "lm_head.weight": [4, d]}
    for name, shape in {"input_layernorm.weight": [d], "self_attn.q_proj.weight": [d, d],
                        "self_attn.k_proj.weight": [kv, d], "self_attn.v_proj.weight": [kv, d],
                        "self_attn.o_proj.weight": [d, d], "post_attention_layernorm.weight": [d],
                        "mlp.gate_proj.weight": [ffn, d], "mlp.up_proj.weight": [ffn, d],
                        "mlp.down_proj.weight": [d, ffn]}.items():
        out["model.layers.0." + name] = shape
    return out


def write(case, files, config=CONFIG):
    os.makedirs(os.path.join(HERE, case), exist_ok=True)
    with open(os.path.join(HERE, case, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    for name, content in files.items():
        with open(os.path.join(HERE, case, name), "wb") as f:
            f.write(content)


def write_config(case, text):
    """A directory holding only config.json: each is refused before any weights are read."""
    os.makedirs(os.path.join(HERE, case), exist_ok=True)
    with open(os.path.join(HERE, case, "config.json"), "wb") as f:
        f.write(text if isinstance(text, bytes) else json.dumps(text, indent=1).encode())


def hostile_configs():
    without_type = {key: value for key, value in CONFIG.items() if key != "model_type"}
    return {
        "config-array": [CONFIG],
        "config-not-json": b'{"model_type": "llama", "vocab_size": 4,',
        "config-nested-10000": b"[" * 10000 + b"]" * 10000,
        "config-not-utf8": b'{"model_type": "ll\xffama"}',
        "config-no-model-type": without_type,
        "config-model-type-bert": dict(CONFIG, model_type="bert"),
        "config-model-type-number": dict(CONFIG, model_type=7),
        "config-hidden-size-zero": dict(CONFIG, hidden_size=0),
        "config-hidden-size-2p40": dict(CONFIG, hidden_size=2**40),
        "config-hidden-size-real": dict(CONFIG, hidden_size=4.5),
        "config-vocab-size-string": dict(CONFIG, vocab_size="4"),
        "config-vocab-size-missing": {key: value for key, value in CONFIG.items() if key != "vocab_size"},
        "config-layers-negative": dict(CONFIG, num_hidden_layers=-1),
        "config-heads-not-dividing": dict(CONFIG, num_attention_heads=3),
        "config-kv-heads-zero": dict(CONFIG, num_key_value_heads=0),
        "config-kv-heads-not-dividing": dict(CONFIG, num_attention_heads=4, hidden_size=8, num_key_value_heads=3),
        "config-rope-theta-negative": dict(CONFIG, rope_theta=-1.0),
        "config-norm-eps-string": dict(CONFIG, rms_norm_eps="1e-5"),
        "config-intermediate-2p31": dict(CONFIG, intermediate_size=2**31),
        "config-context-2p40": dict(CONFIG, max_position_embeddings=2**40),
    }


def hostile_weights(good):
    """tiny's model.safetensors damaged in its header: each is refused before any tensor is allocated."""
    embedding = b'"model.embed_tokens.weight": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}'
    norm = b'"model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [64, 80]}'
    header_length = struct.unpack("<Q", good[:8])[0]
    return {
        "weights-empty": b"",
        "weights-7-bytes": good[:7],
        "weights-header-not-json": good[:8] + b"x" * header_length + good[8 + header_length:],
        "weights-header-array": struct.pack("<Q", 5) + b"[1,2]",
        "weights-dtype-i64": broken(good, embedding, embedding.replace(b"F32", b"I64")),
        "weights-dtype-number": broken(good, embedding, embedding.replace(b'"F32"', b"32")),
        "weights-shape-negative": broken(good, embedding, embedding.replace(b"[4, 4]", b"[-4, -4]")),
        "weights-shape-2p64": broken(good, embedding, embedding.replace(b"[4, 4]", b"[4294967296, 4294967296]")),
        "weights-offsets-reversed": broken(good, embedding, embedding.replace(b"[0, 64]", b"[64, 0]")),
        "weights-offsets-overlap": broken(good, norm, norm.replace(b"[64, 80]", b"[48, 64]")),
        "weights-metadata-not-text": broken(good, b"{" + embedding, b'{"__metadata__": {"format": 1}, ' + embedding),
    }


def index(weight_map):
    return json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1).encode()


def main():
    for case, text in hostile_configs().items():
        write_config(case, text)
    good = safetensors(shapes())
    for case, weights in hostile_weights(good).items():
        write(case, {"model.safetensors": weights})
    write("tiny", {"model.safetensors": good})  # imports: the path tests' source
    twice = shapes()
    twice["embed_tokens.weight"] = twice["model.embed_tokens.weight"]
    write("duplicate-name", {"model.safetensors": safetensors(twice)})
    headless = shapes()
    del headless["lm_head.weight"]
    # transformers reads a null tie_word_embeddings as false: the head must be there.
    write("tie-null", {"model.safetensors": safetensors(headless)}, dict(CONFIG, tie_word_embeddings=None))
    wrong = shapes()
    wrong["model.layers.0.self_attn.k_proj.weight"] = [4, 4]  # as if every head had its own key
    write("wrong-shape", {"model.safetensors": safetensors(wrong)})
    missing = shapes()
    del missing["model.layers.0.mlp.up_proj.weight"]
    write("missing-tensor", {"model.safetensors": safetensors(missing)})
    names = {name: "model-00001-of-00001.safetensors" for name in shapes()}
    write("index-outside", {"model.safetensors.index.json": index(dict(names, **{"lm_head.weight": "../../gpt2/epsilon/model.safetensors"})),
                            "model-00001-of-00001.safetensors": good})
    write("index-missing-file", {"model.safetensors.index.json": index(dict(names, **{"lm_head.weight": "model-00002-of-00002.safetensors"})),
                                 "model-00001-of-00001.safetensors": good})
    write("rope-scaling", {"model.safetensors": good}, dict(CONFIG, rope_scaling={"type": "linear", "factor": 2.0}))
    write("attention-bias", {"model.safetensors": good}, dict(CONFIG, attention_bias=True))
    write("activation", {"model.safetensors": good}, dict(CONFIG, hidden_act="gelu"))


if __name__ == "__main__":
    main()
