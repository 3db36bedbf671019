#!/usr/bin/python3
"""The portability study's report (README.md here): from run.sh's results
directory, per platform (a build in one ranks x threads layout) and deck,

  * architectural efficiency: the time a step's work needs at the layout's
    roofline over the time it took, the work counted whole: the GEMMs' FLOPs
    at min(GEMM peak, arithmetic intensity x memory bandwidth), plus the bytes
    the memory-bound kernels must move (activations, bias gradients, loss,
    data, optimizer) at the memory bandwidth, the peak and the bandwidth
    measured by kernels_benchmark on every rank at once;
  * application efficiency: samples/s over the best samples/s of that deck on
    any platform;
  * samples/s: the median over run.sh's rounds, which take turns between the
    platforms, and 0 (unsupported) unless every round ran;
  * Pennycook's metric over the platforms: their harmonic mean, 0 when a
    platform could not run the deck;
  * for a threaded rank, a cache line's round trip between its threads before
    and after the decks (a VM's vCPUs move, and with them this latency).

Prints a markdown table, writes DIR/portability.json and DIR/portability.png
and .svg.

  /usr/bin/python3 examples/portability/report.py DIR DECK [DECK ...]
"""
import glob
import json
import os
import statistics
import sys
import tomllib

# kpipe's defaults for the keys read here (docs/deck.md), under the deck's values.
MODEL_DEFAULTS = {"input_dim": 64, "hidden": [256, 256, 256, 256], "output_dim": 10}
TRAIN_DEFAULTS = {"microbatch_size": 16, "global_batch": 256, "optimizer": "adamw"}
FLOAT = 4  # bytes

# Bytes per parameter an optimizer step must move: SGD with momentum reads the
# weight, its gradient and its velocity and writes the weight and velocity;
# AdamW reads weight, gradient and both moments and writes three; then the
# gradient is zeroed for the next step.
OPTIMIZER_BYTES = {"sgd": (3 + 2 + 1) * FLOAT, "adamw": (4 + 3 + 1) * FLOAT}


def load(path):
    with open(path) as file:
        return json.load(file)


def deck_model(path):
    """The work of one trained sample of an MLP deck.

    FLOPs: a Linear of in x out costs 2 in out per sample forward, twice that
    backward (input and weight gradients). Its three GEMMs on a microbatch of
    b rows move the b x in, in x out and b x out floats: the arithmetic
    intensity. Memory-bound bytes, the least any implementation moves: each
    hidden activation reads its input and writes its output forward and reads
    the output gradient and what it saved and writes the input gradient
    backward; each bias gradient reads its output gradient; the loss reads the
    logits and writes their gradient; the data writes the input; the
    optimizer's bytes per parameter (OPTIMIZER_BYTES) are shared by the
    global batch's samples."""
    with open(path, "rb") as file:
        deck = tomllib.load(file)
    model = dict(MODEL_DEFAULTS, **deck.get("model", {}))
    train = dict(TRAIN_DEFAULTS, **deck.get("train", {}))
    b = train["microbatch_size"]
    widths = [model["input_dim"], *model["hidden"], model["output_dim"]]
    layers = list(zip(widths[:-1], widths[1:]))
    flops = sum(2 * i * o for i, o in layers)
    gemm_bytes = sum(FLOAT * (b * i + i * o + b * o) for i, o in layers)
    parameters = sum(i * o + o for i, o in layers)
    hidden = sum(model["hidden"])
    memory_bytes = (FLOAT * (2 * hidden + 3 * hidden)  # activations, forward and backward
                    + FLOAT * sum(o for _, o in layers)  # bias gradients
                    + FLOAT * 2 * model["output_dim"]  # the loss
                    + FLOAT * model["input_dim"]  # the data
                    + OPTIMIZER_BYTES[train["optimizer"]] * parameters / train["global_batch"])
    return {"flops_per_sample": 3 * flops, "microbatch_size": b, "arithmetic_intensity": b * flops / gemm_bytes,
            "memory_bound_bytes_per_sample": memory_bytes}


def roofline(prefix):
    """Summed over the ranks that ran at once: the better of the vendor and
    packed GEMMs at 1024^3 (GFLOP/s) and of deep_copy and add (GB/s); medians
    when repeated."""
    gemm = bandwidth = 0.0
    for path in sorted(glob.glob(prefix + "-*.json")):
        runs = [b for b in load(path)["benchmarks"]
                if b.get("run_type") != "aggregate" or b.get("aggregate_name") == "median"]
        gemm += max(b["GFLOP/s"] for b in runs if b["run_name"].startswith(("BM_gemm_vendor/1024/",
                                                                            "BM_gemm_packed/1024/")))
        bandwidth += max(b["bytes_per_second"] for b in runs if b["run_name"].startswith(("BM_deep_copy", "BM_add"))) / 1e9
    return gemm, bandwidth


def rates(d, platform, deck_name, rounds):
    """Each round's samples/s of the deck on the platform; none unless every round ran."""
    found = []
    for r in range(1, rounds + 1):
        path = os.path.join(d, f"{platform}-{deck_name}-round{r}.json")
        if not os.path.exists(path):
            return []
        found.append(load(path)["samples_per_second"])
    return found


def pennycook(efficiencies):
    """|H| / sum(1 / e_i), and 0 if any platform does not run the application."""
    if not efficiencies or any(e <= 0 for e in efficiencies):
        return 0.0
    return len(efficiencies) / sum(1.0 / e for e in efficiencies)


def spread(result):
    """The median samples/s, and the rounds' range where there were several."""
    rounds = result["rounds"]
    if len(rounds) < 2:
        return f"{result['samples_per_second']:.0f}"
    return f"{result['samples_per_second']:.0f} ({min(rounds):.0f}-{max(rounds):.0f})"


def main():
    d, decks = sys.argv[1], sys.argv[2:]
    platforms = []
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        meta = load(path)
        if not isinstance(meta, dict) or "banner" not in meta:
            continue
        name = os.path.basename(path)[:-5]
        gemm, bandwidth = roofline(os.path.join(d, name + "-roofline"))
        platforms.append(dict(meta, name=name, label=f"{meta['kokkos']}, {meta['ranks']} rank x {meta['threads']} thr",
                              gemm_gflops=gemm, bandwidth_gbs=bandwidth))
    rows, summary = [], {}
    for deck in decks:
        deck_name = os.path.basename(deck)[:-5]
        model = deck_model(deck)
        results = []
        for p in platforms:
            rounds = rates(d, p["name"], deck_name, p["rounds"])
            rate = statistics.median(rounds) if rounds else 0.0
            achieved = rate * model["flops_per_sample"] / 1e9
            roof = min(p["gemm_gflops"], model["arithmetic_intensity"] * p["bandwidth_gbs"])
            # Seconds per sample at the roofline: the GEMMs, then the memory-bound kernels.
            ideal = (model["flops_per_sample"] / (roof * 1e9) +
                     model["memory_bound_bytes_per_sample"] / (p["bandwidth_gbs"] * 1e9)) if roof else 0.0
            results.append({"platform": p["name"], "samples_per_second": rate, "rounds": rounds,
                            "achieved_gflops": achieved,
                            "roofline_gflops": roof, "ideal_us_per_sample": ideal * 1e6,
                            "architectural": ideal * rate})
        best = max(r["samples_per_second"] for r in results)
        for r in results:
            r["application"] = r["samples_per_second"] / best if best else 0.0
        summary[deck_name] = {"model": model, "results": results,
                              "pp_architectural": pennycook([r["architectural"] for r in results]),
                              "pp_application": pennycook([r["application"] for r in results])}
        for p, r in zip(platforms, results):
            rows.append([deck_name, p["label"], f"{p['gemm_gflops']:.1f}", f"{p['bandwidth_gbs']:.1f}",
                         f"{r['roofline_gflops']:.1f}", spread(r), f"{r['achieved_gflops']:.1f}",
                         f"{r['ideal_us_per_sample']:.2f}",
                         f"{r['architectural']:.3f}", f"{r['application']:.3f}",
                         f"{p.get('load_average_after', [float('nan')])[0]:.1f}",
                         " / ".join(f"{t:.0f}" for t in p.get("thread_round_trip_ns", [])) or "-"])
    print("| deck | platform | GEMM peak GFLOP/s | bandwidth GB/s | roofline GFLOP/s | samples/s (rounds) "
          "| achieved GFLOP/s "
          "| roofline µs/sample | architectural eff. | application eff. | load (1 min) | thread round trip ns |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for deck_name, s in summary.items():
        m = s["model"]
        print(f"{deck_name}: {m['flops_per_sample'] / 1e6:.2f} MFLOP and "
              f"{m['memory_bound_bytes_per_sample'] / 1e3:.1f} kB of memory-bound traffic per trained sample, GEMM "
              f"arithmetic intensity {m['arithmetic_intensity']:.1f} FLOP/B at b = {m['microbatch_size']}; "
              f"Pennycook PP over {len(platforms)} platforms: architectural {s['pp_architectural']:.3f}, "
              f"application {s['pp_application']:.3f}")
        for p, r in zip(platforms, s["results"]):
            if r["architectural"] > 1:
                # A roofline is an upper bound: a run above it says what it charges at memory bandwidth stayed in cache.
                print(f"{deck_name} on {p['label']}: architectural efficiency {r['architectural']:.3f} > 1: the "
                      f"roofline ({r['roofline_gflops']:.1f} GFLOP/s at {p['bandwidth_gbs']:.1f} GB/s) is no bound "
                      f"here, most likely because operands it charges at memory bandwidth stayed in cache; the "
                      f"architectural PP overstates")
    with open(os.path.join(d, "portability.json"), "w") as file:
        json.dump({"platforms": platforms, "decks": summary}, file, indent=2)
    plot(d, platforms, summary)


def plot(d, platforms, summary):
    try:
        import matplotlib
    except ImportError:  # a GPU node's system Python, say: the table and the JSON are the results
        print(f"report.py: this Python ({sys.executable}) has no matplotlib; {d}/portability.json written, no plot",
              file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summary), figsize=(5.5 * len(summary), 4.2), squeeze=False)
    width = 0.38
    for ax, (deck_name, s) in zip(axes[0], summary.items()):
        x = range(len(platforms))
        ax.bar([i - width / 2 for i in x], [r["architectural"] for r in s["results"]], width, label="architectural")
        ax.bar([i + width / 2 for i in x], [r["application"] for r in s["results"]], width, label="application")
        ax.set_xticks(list(x))
        ax.set_xticklabels([p["label"].replace(", ", "\n") for p in platforms], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("efficiency")
        ax.set_title(f"{deck_name}\nPP arch {s['pp_architectural']:.2f}, PP app {s['pp_application']:.2f}", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(d, f"portability.{ext}"), dpi=120)


if __name__ == "__main__":
    main()
