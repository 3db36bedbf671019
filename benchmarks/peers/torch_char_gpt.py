#!/usr/bin/python3
"""The PyTorch peer of kpipe's character transformer (inputs/kjv-char.toml).

The same model (pre-LayerNorm GPT blocks, exact GELU, learned token and
position embeddings, untied LM head with bias, GPT-2 initialisation), the
same optimizer (AdamW, decay on 2-D weights only, linear warm-up then cosine
decay, global-norm clipping) and the same data split (the first 90% of the
text's characters train, the rest validate; random training windows, fixed
validation windows), in one process with one thread, as kpipe's sequential
trainer runs. Prints one JSON object: tokens/s, the training and validation
losses. Needs Debian's python3-torch and python3-numpy (/usr/bin/python3).

  /usr/bin/python3 benchmarks/peers/torch_char_gpt.py examples/lm/kjv.txt --steps 50
"""
import argparse
import contextlib
import json
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, ratio, layers):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp_norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, ratio * dim)
        self.down = nn.Linear(ratio * dim, dim)
        for linear, std in ((self.qkv, 0.02), (self.proj, 0.02 / math.sqrt(2 * layers)), (self.fc, 0.02),
                            (self.down, 0.02 / math.sqrt(2 * layers))):
            nn.init.normal_(linear.weight, 0.0, std)
            nn.init.zeros_(linear.bias)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        attention = F.softmax(scores.masked_fill(mask[:t, :t], float("-inf")), dim=-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.fc(self.mlp_norm(x))))


class CharGPT(nn.Module):
    def __init__(self, vocab, context, dim, heads, layers, ratio):
        super().__init__()
        self.token = nn.Parameter(torch.randn(vocab, dim) * 0.02)
        self.position = nn.Parameter(torch.randn(context, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, ratio, layers) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        nn.init.normal_(self.head.weight, 0.0, 0.02)
        nn.init.zeros_(self.head.bias)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1))

    def forward(self, ids):
        x = self.token[ids] + self.position[: ids.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.norm(x))


def learning_rate(step, lr, warmup, steps):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", help="UTF-8 text (examples/lm/prepare_kjv.sh makes kjv.txt)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=0, help="steps between validation losses; 0: at the end")
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--bf16", action="store_true",
                        help="train under torch.autocast's bfloat16, kpipe's compute.precision = \"bf16\"")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    precision = torch.autocast("cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    text = open(args.text, encoding="utf-8").read()
    symbols = sorted(set(text))
    index = {c: i for i, c in enumerate(symbols)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
    split = int(len(tokens) * 0.9)
    train, valid = tokens[:split], tokens[split:]
    T = args.context
    model = CharGPT(len(symbols), T, args.dim, args.heads, args.layers, 4)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    rng = np.random.default_rng(args.seed)
    offsets = torch.arange(T)

    def evaluate():
        model.eval()
        windows = (len(valid) - 1) // T
        losses = []
        with torch.no_grad():
            for batch in range(min(args.eval_batches, windows // args.batch)):
                starts = torch.arange(batch * args.batch, (batch + 1) * args.batch) * T
                x = valid[starts[:, None] + offsets]
                y = valid[starts[:, None] + offsets + 1]
                losses.append(F.cross_entropy(model(x).view(-1, len(symbols)), y.view(-1)).item())
        model.train()
        return float(np.mean(losses))

    losses, validation = [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.lr, args.warmup, args.steps)
        starts = torch.from_numpy(rng.integers(0, len(train) - T - 1, args.batch))
        x = train[starts[:, None] + offsets]
        y = train[starts[:, None] + offsets + 1]
        with precision:
            loss = F.cross_entropy(model(x).view(-1, len(symbols)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if args.eval_every and (step + 1) % args.eval_every == 0:
            validation.append({"step": step + 1, "loss": evaluate()})
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if not args.eval_every:
        validation.append({"step": args.steps, "loss": evaluate()})
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "precision": "bf16" if args.bf16 else "fp32",
                      "parameters": sum(p.numel() for p in model.parameters()), "steps": args.steps,
                      "tokens_per_second": args.steps * args.batch * T / seconds, "seconds": seconds,
                      "cpu_tokens_per_second": args.steps * args.batch * T / cpu_seconds,
                      "final_train_loss": float(np.mean(losses[-20:])), "validation": validation}))


if __name__ == "__main__":
    main()
