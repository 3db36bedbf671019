"""What the Hugging Face interop tests (hf_gpt2.py, hf_llama.py) share.

The validation windows are kpipe's (docs/model.md, "Data"): the text's
characters from int(0.9 N) on, as ids of the sorted distinct characters of the
whole text, cut into W = (n - 1) // T windows of T + 1 tokens; kpipe infer
reads the first (W // B) * B of them in batches of B.
"""
import torch


def vocabulary(text_path):
    """The text and its sorted distinct characters (kpipe's character ids)."""
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    return text, sorted(set(text))


def windows(text_path, context, batch):
    text, symbols = vocabulary(text_path)
    index = {c: i for i, c in enumerate(symbols)}
    ids = [index[c] for c in text[len(text) * 9 // 10:]]
    count = (len(ids) - 1) // context
    used = count // batch * batch
    rows = [ids[k * context:k * context + context + 1] for k in range(used)]
    return torch.tensor(rows, dtype=torch.long), len(symbols)


def mean_loss(model, rows):
    """The mean next-token cross-entropy of `model` over the windows, in double."""
    model.eval()
    with torch.no_grad():
        logits = model(rows[:, :-1]).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()
