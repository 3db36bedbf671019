"""Hugging Face's side of the Llama interop test (hf_llama.sh), on kpipe's
validation windows (hf_windows.py).

  hf_llama.py make DIR TEXT T B TIE   writes a random LlamaForCausalLM (grouped-
                                      query attention, sharded safetensors) and
                                      prints its loss over the windows
  hf_llama.py loss DIR TEXT T B EXPECTED
                                      transformers' loss of the model in DIR
                                      equals EXPECTED within 1e-4
  hf_llama.py generate DIR TEXT PROMPT N
                                      prints PROMPT and N greedy tokens after it
"""
import sys

import torch
import transformers

from hf_windows import mean_loss, vocabulary, windows


def load(directory):
    return transformers.LlamaForCausalLM.from_pretrained(directory, attn_implementation="eager")


def main():
    mode, directory, text_path = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "generate":
        prompt, count = sys.argv[4], int(sys.argv[5])
        _, symbols = vocabulary(text_path)
        index = {c: i for i, c in enumerate(symbols)}
        model = load(directory)
        model.eval()
        ids = torch.tensor([[index[c] for c in prompt]], dtype=torch.long)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=count, do_sample=False, num_beams=1, pad_token_id=0,
                                 attention_mask=torch.ones_like(ids))
        print("".join(symbols[i] for i in out[0].tolist()))
        return
    context, batch = int(sys.argv[4]), int(sys.argv[5])
    rows, vocab = windows(text_path, context, batch)
    if mode == "loss":
        expected = float(sys.argv[6])
        loss = mean_loss(load(directory), rows)
        print(f"transformers {transformers.__version__}: loss {loss:.6f} over {rows.shape[0]} windows, "
              f"kpipe infer {expected:.6f}, difference {abs(loss - expected):.2e}")
        sys.exit(0 if abs(loss - expected) <= 1e-4 else 1)
    tie = sys.argv[6] == "true"
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
                                      rms_norm_eps=1e-5, rope_theta=500.0, tie_word_embeddings=tie)
    torch.manual_seed(11)
    model = transformers.LlamaForCausalLM(config)
    # Weights far from the 0.02 initialisation, so every tensor and layout
    # shows in the loss; norms around one.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 0.5)
    # Small shards: the import reads model.safetensors.index.json.
    model.save_pretrained(directory, safe_serialization=True, max_shard_size="8KB")
    print(f"{mean_loss(model, rows):.8f}")


if __name__ == "__main__":
    main()
