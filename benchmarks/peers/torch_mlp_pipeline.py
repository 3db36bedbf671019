#!/usr/bin/python3
"""The PyTorch peer of kpipe's MLP decks (benchmarks/decks/compute_bound.toml).

Reads the same deck and the same key=value overrides kpipe takes, builds the
same model (Linear + activation per hidden width, a last Linear; weights
uniform +-1/sqrt(fan_in), zero biases), the same loss (softmax cross-entropy
or MSE, summed over the microbatch and scaled by 1/B as kpipe does), the same
optimizer (SGD with momentum and L2 term, or AdamW) and the same kind of
synthetic teacher data (docs/model.md "Synthetic data"), generated per
microbatch on the stages that need it, as kpipe does. Then it trains:

  * --mode sequential: one process walks the m microbatches of a step through
    the whole model (forward, loss, backward), then steps the optimizer, as
    kpipe's sequential trainer does;
  * --mode 1f1b: p processes (pipeline.stages), one stage each, split like
    kpipe's balanced partition (largest stage's forward FLOPs minimal), with
    the non-interleaved 1F1B schedule; activations and their gradients go over
    torch.distributed gloo (isend / recv) on this host.

Every process runs one intra-op and one inter-op thread. Warm-up steps are
not timed; each timed step starts after a barrier, and the median step gives
samples/s (of wall time, and of the process's CPU time). Prints one JSON object. Needs Debian's python3-torch
(/usr/bin/python3).

  /usr/bin/python3 benchmarks/peers/torch_mlp_pipeline.py benchmarks/decks/compute_bound.toml --mode 1f1b
"""
import argparse
import contextlib
import json
import math
import statistics
import time
import tomllib

# First: it sets one thread per process before torch loads its BLAS.
from torch_pipeline import join, one_f_one_b, set_threads, spawn

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

# kpipe's defaults for the keys this peer reads (docs/deck.md); the deck and
# the overrides replace them.
DEFAULTS = {
    "model.kind": "mlp", "model.input_dim": 64, "model.hidden": [256, 256, 256, 256], "model.output_dim": 10,
    "model.activation": "gelu", "model.loss": "cross_entropy", "model.seed": 1234,
    "train.global_batch": 256, "train.microbatch_size": 16, "train.steps": 50, "train.optimizer": "adamw",
    "train.lr": 0.001, "train.momentum": 0.9, "train.weight_decay": 0.0, "train.beta1": 0.9, "train.beta2": 0.999,
    "train.epsilon": 1e-8, "data.task": "classification", "data.seed": 42, "data.source": "synthetic",
    "pipeline.stages": 2, "pipeline.schedule": "1f1b", "pipeline.data_parallel": 1, "pipeline.virtual_stages": 1,
    "compute.precision": "fp32",
}


def flatten(table, prefix=""):
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(flatten(value, prefix + key + "."))
        else:
            out[prefix + key] = value
    return out


def read_deck(path, overrides):
    """The deck's keys over kpipe's defaults, then key=value overrides in TOML syntax, as kpipe reads them."""
    with open(path, "rb") as file:
        config = dict(DEFAULTS, **flatten(tomllib.load(file)))
    for item in overrides:
        key, _, value = item.partition("=")
        config.update(flatten(tomllib.loads(f"{key} = {value}")))
    return config


def check_supported(c):
    """What this peer models; anything else would not be the same run."""
    wrong = []
    if c["model.kind"] != "mlp":
        wrong.append(f"model.kind = {c['model.kind']!r} (only \"mlp\")")
    if c["data.source"] != "synthetic":
        wrong.append(f"data.source = {c['data.source']!r} (only \"synthetic\")")
    if c["pipeline.data_parallel"] != 1 or c["pipeline.virtual_stages"] != 1:
        wrong.append("data_parallel and virtual_stages other than 1")
    if c["compute.precision"] not in ("fp32", "bf16"):
        wrong.append(f"compute.precision = {c['compute.precision']!r}")
    if c["train.global_batch"] % c["train.microbatch_size"]:
        wrong.append("a global batch that is not a multiple of the microbatch size")
    if wrong:
        raise SystemExit("torch_mlp_pipeline.py: unsupported: " + "; ".join(wrong))


def layer_widths(c):
    widths = [c["model.input_dim"], *c["model.hidden"], c["model.output_dim"]]
    return list(zip(widths[:-1], widths[1:]))


def balanced_partition(c, stages):
    """kpipe's partition (src/model/partition.cpp): bisect the largest stage's
    forward FLOPs, filling stages greedily and leaving a layer for each later one."""
    flops = [2 * i * o for i, o in layer_widths(c)]

    def greedy(limit):
        counts, nxt = [], 0
        for s in range(stages):
            later, cost, count = stages - s - 1, 0, 0
            while nxt + count < len(flops) - later and (count == 0 or cost + flops[nxt + count] <= limit):
                cost += flops[nxt + count]
                count += 1
            if cost > limit:
                return None
            counts.append(count)
            nxt += count
        return counts if nxt == len(flops) else None

    low, high = max(flops), sum(flops)
    while low < high:
        mid = low + (high - low) // 2
        if greedy(mid) is None:
            low = mid + 1
        else:
            high = mid
    return greedy(low)


def build_stage(c, first, count):
    activation = {"gelu": nn.GELU(), "relu": nn.ReLU(), "tanh": nn.Tanh()}[c["model.activation"]]
    generator = torch.Generator().manual_seed(c["model.seed"])
    modules, shapes = [], layer_widths(c)
    for index, (fan_in, fan_out) in enumerate(shapes):
        linear = nn.Linear(fan_in, fan_out)
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():  # every stage draws all weights, so any partition has the same model
            linear.weight.uniform_(-bound, bound, generator=generator)
            linear.bias.zero_()
        if first <= index < first + count:
            modules.append(linear)
            if index < len(shapes) - 1:
                modules.append(activation)
    return nn.Sequential(*modules)


def make_optimizer(c, parameters):
    if c["train.optimizer"] == "sgd":
        return torch.optim.SGD(parameters, lr=c["train.lr"], momentum=c["train.momentum"],
                               weight_decay=c["train.weight_decay"])
    return torch.optim.AdamW(parameters, lr=c["train.lr"], betas=(c["train.beta1"], c["train.beta2"]),
                             eps=c["train.epsilon"], weight_decay=c["train.weight_decay"])


class Teacher:
    """kpipe's synthetic tasks (docs/model.md): classification draws a class
    centre (standard normal) plus unit noise and labels it by the argmax of the
    linear teacher's logits x.c - |c|^2/2; regression labels standard normal
    inputs with a tanh teacher of 64 hidden units. Each microbatch is a pure
    function of (data.seed, step, microbatch), so stages agree on it."""

    def __init__(self, c):
        self.c = c
        g = torch.Generator().manual_seed(c["data.seed"])
        n_in, n_out = c["model.input_dim"], c["model.output_dim"]
        self.classification = c["data.task"] == "classification"
        if self.classification:
            self.centres = torch.randn(n_out, n_in, generator=g)
            self.offsets = 0.5 * (self.centres * self.centres).sum(dim=1)
        else:
            self.w1 = torch.randn(n_in, 64, generator=g) / math.sqrt(n_in)
            self.w2 = torch.randn(64, n_out, generator=g) / 8.0

    def microbatch(self, step, index):
        c = self.c
        b = c["train.microbatch_size"]
        g = torch.Generator().manual_seed(c["data.seed"] * 1_000_003 + step * 10_007 + index)
        if self.classification:
            classes = torch.randint(0, c["model.output_dim"], (b,), generator=g)
            x = self.centres[classes] + torch.randn(b, c["model.input_dim"], generator=g)
            y = (x @ self.centres.T - self.offsets).argmax(dim=1)
        else:
            x = torch.randn(b, c["model.input_dim"], generator=g)
            y = torch.tanh(x @ self.w1) @ self.w2
        return x, y


def precision(c, device="cpu"):
    """compute.precision = "bf16": torch.autocast's bfloat16 (Linear layers in
    bfloat16, master weights and the optimizer in float32), kpipe's peer."""
    if c["compute.precision"] == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def loss_of(c, output, target):
    """Summed over the microbatch, scaled by 1/B: the microbatch gradients add up to the mean's."""
    if c["model.loss"] == "cross_entropy":
        total = F.cross_entropy(output, target, reduction="sum")
    else:
        total = F.mse_loss(output, target, reduction="sum") / output.shape[1]
    return total / c["train.global_batch"]


def sequential_step(c, model, optimizer, teacher, step, device):
    optimizer.zero_grad(set_to_none=False)
    total = 0.0
    for j in range(c["train.global_batch"] // c["train.microbatch_size"]):
        x, y = (t.to(device) for t in teacher.microbatch(step, j))
        with precision(c, device):
            loss = loss_of(c, model(x), y)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def pipeline_step(c, rank, stages, model, optimizer, teacher, step, widths):
    """One step of non-interleaved 1F1B (torch_pipeline.one_f_one_b)."""
    b = c["train.microbatch_size"]
    m = c["train.global_batch"] // b
    last = rank == stages - 1
    in_width, out_width = widths
    kept, sends = {}, []
    total = torch.zeros(1)

    def forward(j):
        if rank == 0:
            x, _ = teacher.microbatch(step, j)
        else:
            x = torch.empty(b, in_width)
            dist.recv(x, rank - 1)
            x.requires_grad_()
        with precision(c):
            y = model(x)
            if last:
                y = loss_of(c, y, teacher.microbatch(step, j)[1])
        if last:
            total.add_(y.detach().float())
        else:
            out = y.detach().float()  # float32 between stages, as kpipe sends
            sends.append((dist.isend(out, rank + 1), out))
        kept[j] = (x, y)

    def backward(j):
        x, y = kept.pop(j)
        if last:
            y.backward()
        else:
            grad = torch.empty(b, out_width)
            dist.recv(grad, rank + 1)
            y.backward(grad.to(y.dtype))
        if rank > 0:
            sends.append((dist.isend(x.grad, rank - 1), x.grad))

    optimizer.zero_grad(set_to_none=False)
    one_f_one_b(rank, stages, m, forward, backward)
    for work, _ in sends:
        work.wait()
    optimizer.step()
    # The step's mean loss on every rank, as kpipe's global_loss does.
    dist.all_reduce(total)
    return total.item()


def timed(c, args, run_step, barrier):
    for step in range(args.warmup):
        run_step(step)
    seconds, cpu_seconds, losses = [], [], []
    for step in range(args.warmup, args.warmup + args.steps):
        barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        losses.append(run_step(step))
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
    median, mean = statistics.median(seconds), statistics.mean(seconds)
    # On a shared machine the process's CPU time is the steadier measure of its work.
    cpu_median = statistics.median(cpu_seconds)
    return {"median_step_ms": 1e3 * median, "samples_per_second": c["train.global_batch"] / median,
            "median_step_cpu_ms": 1e3 * cpu_median, "samples_per_second_cpu": c["train.global_batch"] / cpu_median,
            "mean_step_ms": 1e3 * mean, "samples_per_second_mean": c["train.global_batch"] / mean,
            "step_ms": [1e3 * s for s in seconds], "first_loss": losses[0], "last_loss": losses[-1]}


def describe(c, args, stages, partition):
    return {"peer": "pytorch", "torch": torch.__version__, "threads_per_process": torch.get_num_threads(),
            "mode": args.mode, "processes": stages, "partition": partition, "deck": args.deck,
            "overrides": args.overrides, "global_batch": c["train.global_batch"],
            "microbatch_size": c["train.microbatch_size"],
            "m": c["train.global_batch"] // c["train.microbatch_size"], "warmup_steps": args.warmup,
            "steps_timed": args.steps, "precision": c["compute.precision"], "device": args.device}


def sequential_main(c, args):
    set_threads()
    layers = len(layer_widths(c))
    model = build_stage(c, 0, layers).to(args.device)
    optimizer = make_optimizer(c, model.parameters())
    teacher = Teacher(c)
    result = describe(c, args, 1, [layers])

    def run_step(step):
        loss = sequential_step(c, model, optimizer, teacher, step, args.device)
        if args.device != "cpu":
            torch.cuda.synchronize()  # the optimizer's kernels are in the step's time
        return loss

    result.update(timed(c, args, run_step, lambda: None))
    print(json.dumps(result))


def stage_main(rank, c, args, stages, port):
    join(rank, stages, port)
    partition = balanced_partition(c, stages)
    first = sum(partition[:rank])
    shapes = layer_widths(c)
    widths = (shapes[first][0], shapes[first + partition[rank] - 1][1])
    model = build_stage(c, first, partition[rank])
    optimizer = make_optimizer(c, model.parameters())
    teacher = Teacher(c)
    result = timed(c, args, lambda step: pipeline_step(c, rank, stages, model, optimizer, teacher, step, widths),
                   dist.barrier)
    if rank == 0:
        out = describe(c, args, stages, partition)
        out["schedule"] = "1f1b"
        out.update(result)
        print(json.dumps(out), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("deck", help="a kpipe MLP deck (TOML)")
    parser.add_argument("overrides", nargs="*", help="key=value, as on kpipe's command line")
    parser.add_argument("--mode", choices=["sequential", "1f1b"], default="1f1b")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: the deck's train.steps)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--device", default="cpu",
                        help="torch device of --mode sequential, e.g. cuda (teacher data made on the CPU, copied "
                             "per microbatch; each microbatch's loss.item() syncs)")
    args = parser.parse_args()
    c = read_deck(args.deck, args.overrides)
    check_supported(c)
    if args.steps is None:
        args.steps = c["train.steps"]
    if args.mode == "sequential":
        sequential_main(c, args)
        return
    if args.device != "cpu":
        raise SystemExit("torch_mlp_pipeline.py: --device is for --mode sequential; the 1f1b peer runs on CPUs "
                         "over gloo")
    stages = c["pipeline.stages"]
    if c["pipeline.schedule"] != "1f1b":
        raise SystemExit(f"torch_mlp_pipeline.py: --mode 1f1b runs pipeline.schedule = \"1f1b\", "
                         f"not {c['pipeline.schedule']!r}")
    spawn(stage_main, stages, c, args, stages)


if __name__ == "__main__":
    main()
