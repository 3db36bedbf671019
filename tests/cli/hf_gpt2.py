"""Hugging Face's side of the GPT-2 interop test (hf_gpt2.sh).

The validation windows are kpipe's (docs/model.md, "Data"): the text's
characters from int(0.9 N) on, as ids of the sorted distinct characters of the
whole text, cut into W = (n - 1) // T windows of T + 1 tokens; kpipe infer
reads the first (W // B) * B of them in batches of B.

  hf_gpt2.py loss DIR TEXT T B EXPECTED   transformers' loss of the model in DIR
                                           equals EXPECTED within 1e-4
  hf_gpt2.py make DIR TEXT T              writes a random GPT-2 with save_pretrained
                                           and prints its loss over every window batch
"""
import sys

import torch
import transformers


def windows(text_path, context, batch):
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    symbols = {c: i for i, c in enumerate(sorted(set(text)))}
    ids = [symbols[c] for c in text[len(text) * 9 // 10:]]
    count = (len(ids) - 1) // context
    used = count // batch * batch
    rows = [ids[k * context:k * context + context + 1] for k in range(used)]
    return torch.tensor(rows, dtype=torch.long), len(symbols)


def mean_loss(model, rows):
    model.eval()
    with torch.no_grad():
        logits = model(rows[:, :-1]).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()


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
