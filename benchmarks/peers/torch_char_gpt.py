#!/usr/bin/python3
"""The PyTorch peer of kpipe's character transformer (inputs/kjv-char.toml).

The same model (pre-LayerNorm GPT blocks, exact GELU, learned token and
position embeddings, untied LM head with bias, GPT-2 initialisation), the
same optimizer (AdamW, decay on 2-D weights only, linear warm-up then cosine
decay, global-norm clipping) and the same data split (the first 90% of the
text's characters train, the rest validate; random training windows, fixed
validation windows), one thread per process:

  * --mode sequential: one process, each step's whole batch at once, as
    kpipe's sequential trainer runs; prints tokens/s and the training and
    validation losses;
  * --mode 1f1b: --stages processes, the embedding and the first blocks on
    the first, the last blocks, the final LayerNorm and the head on the last
    (blocks split evenly, as kpipe's partition of kjv-char at p = 2), the
    batch in microbatches of --microbatch sequences (kpipe's b = 8), the
    non-interleaved 1F1B schedule over gloo on this host, the residual
    stream sent in float32; prints tokens/s and the training losses.

Prints one JSON object. Needs Debian's python3-torch and python3-numpy
(/usr/bin/python3).

  /usr/bin/python3 benchmarks/peers/torch_char_gpt.py examples/lm/kjv.txt --steps 50
  /usr/bin/python3 benchmarks/peers/torch_char_gpt.py examples/lm/kjv.txt --steps 20 --mode 1f1b --bf16
"""
import argparse
import contextlib
import json
import math
import time

# First: it sets one thread per process before torch loads its BLAS.
from torch_pipeline import join, one_f_one_b, set_threads, spawn

import numpy as np
import torch
import torch.distributed as dist
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


def adamw(parameters, lr):
    """AdamW with weight decay on the 2-D weights only."""
    decay = [p for p in parameters if p.dim() >= 2]
    rest = [p for p in parameters if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8)


class Run:
    """What both modes share: the text's tokens and split, the model (made
    alike in every process from the seed), the training windows' generator."""

    def __init__(self, args):
        self.args = args
        torch.manual_seed(args.seed)
        self.device = torch.device(args.device)
        self.precision = (torch.autocast(self.device.type, dtype=torch.bfloat16) if args.bf16
                          else contextlib.nullcontext())
        text = open(args.text, encoding="utf-8").read()
        self.symbols = sorted(set(text))
        index = {c: i for i, c in enumerate(self.symbols)}
        tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
        split = int(len(tokens) * 0.9)
        self.train, self.valid = tokens[:split], tokens[split:]
        self.model = CharGPT(len(self.symbols), args.context, args.dim, args.heads, args.layers, 4).to(self.device)
        self.rng = np.random.default_rng(args.seed)
        self.offsets = torch.arange(args.context)

    def batch(self):
        """The next step's training windows (inputs, targets), the same in every process."""
        T, B = self.args.context, self.args.batch
        starts = torch.from_numpy(self.rng.integers(0, len(self.train) - T - 1, B))
        x, y = self.train[starts[:, None] + self.offsets], self.train[starts[:, None] + self.offsets + 1]
        return x.to(self.device), y.to(self.device)

    def set_lr(self, optimizer, step):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, self.args.lr, self.args.warmup, self.args.steps)

    def report(self, seconds, cpu_seconds, **fields):
        a = self.args
        tokens = a.steps * a.batch * a.context
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "mode": a.mode, "device": a.device, "precision": "bf16" if a.bf16 else "fp32",
                          "parameters": sum(p.numel() for p in self.model.parameters()), "steps": a.steps,
                          "tokens_per_second": tokens / seconds, "seconds": seconds,
                          "cpu_tokens_per_second": tokens / cpu_seconds, **fields}), flush=True)


def sequential_main(args):
    set_threads()
    run = Run(args)
    model, vocab, T = run.model, len(run.symbols), args.context
    optimizer = adamw(list(model.parameters()), args.lr)

    def evaluate():
        model.eval()
        windows = (len(run.valid) - 1) // T
        losses = []
        with torch.no_grad():
            for batch in range(min(args.eval_batches, windows // args.batch)):
                starts = torch.arange(batch * args.batch, (batch + 1) * args.batch) * T
                x = run.valid[starts[:, None] + run.offsets].to(run.device)
                y = run.valid[starts[:, None] + run.offsets + 1].to(run.device)
                losses.append(F.cross_entropy(model(x).view(-1, vocab), y.view(-1)).item())
        model.train()
        return float(np.mean(losses))

    losses, validation = [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    for step in range(args.steps):
        run.set_lr(optimizer, step)
        x, y = run.batch()
        with run.precision:
            loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if args.eval_every and (step + 1) % args.eval_every == 0:
            validation.append({"step": step + 1, "loss": evaluate()})
    if run.device.type == "cuda":
        torch.cuda.synchronize()  # the last optimizer step's kernels are in the time
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if not args.eval_every:
        validation.append({"step": args.steps, "loss": evaluate()})
    run.report(seconds, cpu_seconds, final_train_loss=float(np.mean(losses[-20:])), validation=validation)


class Stage:
    """Stage `rank` of `stages` of the model: its blocks (an even share), the
    embedding on the first, the final LayerNorm and the head on the last."""

    def __init__(self, model, rank, stages):
        per = len(model.blocks) // stages
        self.model, self.first, self.last = model, rank == 0, rank == stages - 1
        self.blocks = model.blocks[rank * per:(rank + 1) * per]
        self.parameters = list(self.blocks.parameters())
        if self.first:
            self.parameters += [model.token, model.position]
        if self.last:
            self.parameters += list(model.norm.parameters()) + list(model.head.parameters())

    def __call__(self, x):
        m = self.model
        if self.first:
            x = m.token[x] + m.position[: x.shape[1]]
        for block in self.blocks:
            x = block(x, m.mask)
        return m.head(m.norm(x)) if self.last else x


def pipeline_step(run, rank, stages, stage, optimizer, step):
    """One step of 1F1B (torch_pipeline.one_f_one_b): each microbatch's loss
    scaled by 1/m, so the gradients sum to those of the whole batch's mean;
    the global gradient norm over every stage clipped to 1."""
    a = run.args
    b, T, vocab = a.microbatch, a.context, len(run.symbols)
    m = a.batch // b
    x, y = run.batch()
    kept, sends = {}, []
    total = torch.zeros(1)

    def forward(j):
        if stage.first:
            inputs = x[j * b:(j + 1) * b]
        else:
            inputs = torch.empty(b, T, a.dim)
            dist.recv(inputs, rank - 1)
            inputs.requires_grad_()
        with run.precision:
            out = stage(inputs)
            if stage.last:
                out = F.cross_entropy(out.view(-1, vocab), y[j * b:(j + 1) * b].reshape(-1)) / m
        if stage.last:
            total.add_(out.detach().float())
        else:
            sent = out.detach().float().contiguous()
            sends.append((dist.isend(sent, rank + 1), sent))
        kept[j] = (inputs, out)

    def backward(j):
        inputs, out = kept.pop(j)
        if stage.last:
            out.backward()
        else:
            grad = torch.empty(b, T, a.dim)
            dist.recv(grad, rank + 1)
            out.backward(grad.to(out.dtype))
        if not stage.first:
            sends.append((dist.isend(inputs.grad, rank - 1), inputs.grad))

    run.set_lr(optimizer, step)
    optimizer.zero_grad(set_to_none=False)
    one_f_one_b(rank, stages, m, forward, backward)
    for work, _ in sends:
        work.wait()
    squares = torch.zeros(1)
    for p in stage.parameters:
        squares += p.grad.float().pow(2).sum()
    dist.all_reduce(squares)
    factor = 1.0 / (math.sqrt(squares.item()) + 1e-6)
    if factor < 1.0:
        for p in stage.parameters:
            p.grad.mul_(factor)
    optimizer.step()
    dist.all_reduce(total)  # the step's loss on every rank
    return total.item()


def stage_main(rank, args, port):
    join(rank, args.stages, port)
    run = Run(args)
    stage = Stage(run.model, rank, args.stages)
    optimizer = adamw(stage.parameters, args.lr)
    losses = []
    dist.barrier()
    start, cpu_start = time.perf_counter(), time.process_time()
    for step in range(args.steps):
        losses.append(pipeline_step(run, rank, args.stages, stage, optimizer, step))
    dist.barrier()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    if rank == 0:
        run.report(seconds, cpu_seconds, processes=args.stages, microbatch_size=args.microbatch,
                   final_train_loss=float(np.mean(losses[-20:])))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", help="UTF-8 text (examples/lm/prepare_kjv.sh makes kjv.txt)")
    parser.add_argument("--mode", choices=["sequential", "1f1b"], default="sequential")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--microbatch", type=int, default=8, help="sequences per microbatch (--mode 1f1b)")
    parser.add_argument("--stages", type=int, default=2, help="processes (--mode 1f1b)")
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=0, help="steps between validation losses; 0: at the end")
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--device", default="cpu",
                        help="torch device of --mode sequential, e.g. cuda (the losses' .item() syncs each step)")
    parser.add_argument("--bf16", action="store_true",
                        help="train under torch.autocast's bfloat16, kpipe's compute.precision = \"bf16\"")
    args = parser.parse_args()
    if args.mode == "sequential":
        sequential_main(args)
        return
    if args.device != "cpu":
        raise SystemExit("torch_char_gpt.py: --device is for --mode sequential; the 1f1b peer runs on CPUs over gloo")
    if args.layers % args.stages or args.batch % args.microbatch:
        raise SystemExit("torch_char_gpt.py: --mode 1f1b needs --layers a multiple of --stages and --batch of "
                         "--microbatch")
    spawn(stage_main, args.stages, args)


if __name__ == "__main__":
    main()
