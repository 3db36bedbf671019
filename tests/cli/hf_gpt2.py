"""Hugging Face's side of the GPT-2 interop test (hf_gpt2.sh), on kpipe's
validation windows (hf_windows.py).

  hf_gpt2.py loss DIR TEXT T B EXPECTED   transformers' loss of the model in DIR
                                           equals EXPECTED within 1e-4
  hf_gpt2.py make DIR TEXT T              writes a random GPT-2 with save_pretrained
                                           and prints its loss over every window batch
"""
import sys

import torch
import transformers

from hf_windows import mean_loss, windows


def main():
    mode, directory, text_path, context = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode == "loss":
        batch, expected = int(sys.argv[5]), float(sys.argv[6])
        rows, _ = windows(text_path, context, batch)
        model = transformers.GPT2LMHeadModel.from_pretrained(directory)
        loss = mean_loss(model, rows)
        print(f"transformers {transformers.__version__}: loss {loss:.6f} over {rows.shape[0]} windows, "
              f"kpipe infer {expected:.6f}, difference {abs(loss - expected):.2e}")
        sys.exit(0 if abs(loss - expected) <= 1e-4 else 1)
    batch = int(sys.argv[5])
    rows, vocab = windows(text_path, context, batch)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=context, n_embd=16, n_layer=2, n_head=2,
                                     activation_function="gelu_new", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    torch.manual_seed(7)
    model = transformers.GPT2LMHeadModel(config)
    # Weights far from the 0.02 initialisation, so every tensor and layout shows in the loss.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 1.0)
    model.save_pretrained(directory, safe_serialization=True)
    print(f"{mean_loss(model, rows):.8f}")


if __name__ == "__main__":
    main()
