#!/usr/bin/python3
"""One markdown summary of a scripts/bench.sh results directory (its JSON
files), on stdout. A part whose files are missing is left out; a part that
was skipped says why.

  /usr/bin/python3 benchmarks/summarise.py DIR > DIR/summary.md
"""
import glob
import json
import os
import statistics
import sys

SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v"]


def load(path):
    with open(path) as file:
        return json.load(file)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def kernels(d):
    """Google Benchmark's JSON: medians when it ran repetitions, single runs otherwise."""
    runs = {}
    for b in load(os.path.join(d, "kernels.json"))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        runs[b["run_name"]] = b
    out = ["## Kernels\n\n"]
    gemm = {}
    for name, b in runs.items():
        kind, *shape = name.split("/")[:4]
        if kind in ("BM_gemm_vendor", "BM_gemm_portable", "BM_cblas_sgemm"):
            gemm.setdefault(" x ".join(shape), {})[kind] = b["GFLOP/s"]
    if gemm:
        rows = []
        for shape, g in sorted(gemm.items(), key=lambda kv: [int(x) for x in kv[0].split(" x ")]):
            vendor, blas, portable = g.get("BM_gemm_vendor"), g.get("BM_cblas_sgemm"), g.get("BM_gemm_portable")
            rows.append([shape, fmt(vendor, 1), fmt(blas, 1), ratio(vendor, blas), fmt(portable, 1), ratio(portable, vendor)])
        out.append("GEMM, float, GFLOP/s (C = A B, m x n x k):\n\n")
        out.append(table(["m x n x k", "kpipe vendor", "cblas_sgemm", "vendor / cblas", "kpipe portable",
                          "portable / vendor"], rows))
    copy = runs.get("BM_deep_copy/real_time", {}).get("bytes_per_second")
    rows = []
    for name, b in runs.items():
        if "bytes_per_second" in b and not name.startswith("BM_attention"):
            rows.append([name.replace("/real_time", ""), fmt(b["bytes_per_second"] / 1e9, 1),
                         ratio(b["bytes_per_second"], copy)])
    if rows:
        out.append("\nElementwise, GB/s (10^9 B; activation_forward/0 GELU, /1 ReLU, /2 tanh):\n\n")
        out.append(table(["kernel", "GB/s", "vs deep_copy"], rows))
    rows = [[name.replace("/real_time", ""), fmt(b["tokens/s"] / 1e3, 1), fmt(b["saved_bytes"] / 1e6, 1)]
            for name, b in runs.items() if name.startswith("BM_attention")]
    if rows:
        out.append("\nCausal attention forward + backward (4 heads of 32, 4096 tokens per call):\n\n")
        out.append(table(["kernel / T", "k tokens/s", "kept MB"], rows))
    return "".join(out)


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b, digits=2):
    return "–" if a is None or not b else f"{a / b:.{digits}f}"


def pipeline(d):
    rows = []
    for s in SCHEDULES:
        path = os.path.join(d, f"pipeline-{s}.json")
        if not os.path.exists(path):
            continue
        r = load(path)
        bub = r["bubble"]
        rows.append([s, r["p"], r["v"], r["m"], fmt(r["sequential"]["median_step_ms"], 1),
                     fmt(r["pipeline"]["median_step_ms"], 1), fmt(r["speedup"]),
                     fmt(bub["theoretical_idle_over_useful"], 3), fmt(bub["simulated_measured_costs"]["idle_over_useful"], 3),
                     fmt(bub["measured"]["idle_over_useful"], 3)])
    if not rows:
        return ""
    return ("## Pipeline efficiency (benchmarks/decks/compute_bound.toml, 2 ranks)\n\n"
            "Bubbles are idle / useful time; \"simulated\" uses the per-stage costs measured in the same run, "
            "with free communication; speed-up is the sequential trainer's median step over the pipeline's.\n\n"
            + table(["schedule", "p", "v", "m", "sequential ms", "pipeline ms", "speed-up", "bubble (p-1)/(vm)",
                     "simulated", "measured"], rows))


def action_overhead(d):
    kinds = ["F", "B", "W", "LOSS", "SEND_ACT", "RECV_ACT", "SEND_GRAD", "RECV_GRAD", "OPTIMIZER_STEP"]
    rows = []
    for ranks in (2, 4):
        path = os.path.join(d, f"action-overhead-{ranks}.json")
        if not os.path.exists(path):
            continue
        a = load(path)["actions"]
        rows.append([ranks] + [f"{a[k]['median_us']:.1f} / {a[k]['p10_us']:.1f}" if k in a else "–" for k in kinds])
    if not rows:
        return ""
    return ("## Fixed cost per action kind (benchmarks/decks/zero_work.toml, ZB-H1; µs, median / 10th percentile)\n\n"
            "Actions of next to no work: what the executor, the stage, the pool and MPI add around the compute. "
            "A receive's median includes waiting for its peer.\n\n"
            + table(["ranks"] + kinds, rows))


def memory(d):
    rows = []
    for s in SCHEDULES:
        for recompute in ("none", "full"):
            path = os.path.join(d, f"memory-{s}-{recompute}.json")
            if not os.path.exists(path):
                continue
            ranks = sorted(load(path)["ranks"], key=lambda r: r["stage"])

            def each(key, digits=None):
                values = [r[key] for r in ranks]
                return " / ".join("–" if v is None else (str(v) if digits is None else f"{v:.{digits}f}") for v in values)

            rows.append([s, recompute, each("predicted_peak_stashed"), each("peak_stashed"),
                         each("peak_stashed_mib", 2), each("estimated_memory_mib", 1), each("peak_resident_mib", 1)])
    if not rows:
        return ""
    return ("## Memory per schedule and recompute mode (compute_bound deck, 3 steps; rank 0 / rank 1)\n\n"
            + table(["schedule", "recompute", "predicted peak stash (microbatches)", "measured peak stash",
                     "stashed MiB", "estimate MiB", "peak RSS MiB"], rows))


def gradient_sums(d):
    rows = []
    for overlap in ("true", "false"):
        r = load(os.path.join(d, f"gradient-sum-{overlap}.json"))
        ranks = sorted(r["ranks"], key=lambda x: (x["replica"], x["stage"]))
        in_flight = " / ".join(f"{1e3 * x['gradient_sum_in_flight_seconds']:.2f}" for x in ranks)
        exposed = " / ".join(f"{1e3 * x['gradient_sum_exposed_seconds']:.2f}" for x in ranks)
        rows.append([overlap, f"{r['samples_per_second']:.0f}", in_flight, exposed,
                     f"{100 * r['gradient_sum']['hidden_fraction']:.0f}%"])
    return ("## Data-parallel gradient sums (compute_bound deck, p = 2, d = 2; ranks by replica, stage)\n\n"
            + table(["overlap_grad_reduce", "samples/s", "in flight ms per step", "exposed ms per step",
                     "hidden"], rows))


def tensor_parallel(d):
    rows = []
    for grid in ("211", "121", "221"):
        r = load(os.path.join(d, f"tensor-parallel-{grid}.json"))
        step = sum(r["step_seconds"][1:]) / max(1, len(r["step_seconds"]) - 1)
        predicted = (r.get("calibrated_prediction") or {}).get("step_seconds")
        row = [f"({grid[0]}, {grid[1]}, {grid[2]})", f"{r['samples_per_second']:.0f}", f"{1e3 * step:.1f}",
               fmt(1e3 * predicted, 1) if predicted else "–"]
        for link in ("pipeline", "tensor", "data"):
            measured = sum(x["bytes_per_step"][link]["measured"] for x in r["ranks"]) / 2**20
            expected = sum(x["bytes_per_step"][link]["predicted"] for x in r["ranks"]) / 2**20
            row.append(f"{measured:.2f} / {expected:.2f}")
        rows.append(row)
    return ("## Tensor parallelism (inputs/tensor_parallel.toml at kjv-char's shapes; all ranks summed)\n\n"
            + table(["(p, t, d)", "samples/s", "step ms", "calibrated prediction ms",
                     "pipeline MiB/step measured / predicted", "tensor MiB/step", "data MiB/step"], rows))


def sweep(d):
    path = os.path.join(d, "sweep.json")
    if not os.path.exists(path):
        return ""
    r = load(path)
    if "skipped" in r:
        return f"## Microbatch-size sweep\n\nSkipped: {r['skipped']}\n"
    rows = [[x["b"], x["m"], fmt(x["measured_samples_per_second"], 0), fmt(x["predicted_samples_per_second"], 0),
             fmt(x["measured_bubble"], 3), fmt(x["predicted_bubble"], 3), fmt(x["peak_activation_mib"], 2)]
            for x in r["rows"]]
    rec = r["recommendation"]
    return (f"## Microbatch-size sweep ({r['schedule']}, p = {r['p']}, B = {r['global_batch']})\n\n"
            + table(["b", "m", "measured samples/s", "predicted samples/s", "measured bubble", "predicted bubble",
                     "peak activations MiB"], rows)
            + f"\nBest measured b = {rec['measured_best_b']}, predicted best b = {rec['predicted_best_b']} "
              f"({fmt(100 * rec['predicted_best_measured_fraction'], 1)}% of the best measured throughput).\n")


def transformer(d):
    path = os.path.join(d, "transformer.json")
    if not os.path.exists(path):
        return ""
    r = load(path)
    s = r["sequential"]
    share = s["share"]
    rows = [["sequential, 1 rank", fmt(s["tokens_per_second"], 0), fmt(100 * share["attention"], 0),
             fmt(100 * share["linear_gemm_and_bias"], 0), fmt(100 * share["rest"], 0)]]
    if "pipelined" in r:
        p = r["pipelined"]
        rows.append([f"{p['schedule']}, p = {p['p']}", fmt(p["tokens_per_second"], 0), "", "", ""])
    text = (f"## Transformer (inputs/kjv-char.toml, data: {r['data']}, {r['steps']} steps)\n\n"
            + table(["run", "tokens/s", "attention %", "Linear (GEMM + bias) %", "rest %"], rows))
    if "speedup" in r:
        text += f"\nSpeed-up of p = 2 over sequential: {r['speedup']:.2f}x.\n"
    return text


def peer_mlp(d):
    rounds = sorted(glob.glob(os.path.join(d, "peer-mlp-pytorch-sequential-*.json")))
    if not rounds:
        return ""
    rows, seq_ratios, pipe_ratios = [], [], []
    for path in rounds:
        n = path.rsplit("-", 1)[1].split(".")[0]
        torch_seq = load(path)
        torch_pipe = load(os.path.join(d, f"peer-mlp-pytorch-1f1b-{n}.json"))
        kpipe_seq = load(os.path.join(d, f"peer-mlp-kpipe-sequential-{n}.json"))["sequential"]
        kpipe_pipe = load(os.path.join(d, f"peer-mlp-kpipe-1f1b-{n}.json"))
        B = torch_seq["global_batch"]
        # Like with like: transformer_benchmark times a block of steps (a mean), pipeline_benchmark takes medians.
        ks, ts = B / kpipe_seq["seconds_per_step"], torch_seq["samples_per_second_mean"]
        kp, tp = kpipe_pipe["pipeline"]["samples_per_second"], torch_pipe["samples_per_second"]
        seq_ratios.append(ks / ts)
        pipe_ratios.append(kp / tp)
        share = kpipe_seq["share"]["linear_gemm_and_bias"]
        regions = kpipe_seq["share_by_region"]
        data = sum(v for k, v in regions.items() if k.startswith("kpipe::model::synthetic"))
        step_ms = 1e3 * kpipe_seq["seconds_per_step"]
        rows.append([n, fmt(ks, 0), fmt(ts, 0), fmt(ks / ts), fmt(kp, 0), fmt(tp, 0), fmt(kp / tp),
                     f"{fmt(step_ms, 1)} = {fmt(share * step_ms, 1)} + {fmt(data * step_ms, 1)} + "
                     f"{fmt((1 - share - data) * step_ms, 1)}",
                     fmt(torch_seq["mean_step_ms"], 1)])
    cfg = load(rounds[0])
    text = (f"## Peer comparison: MLP (kpipe against PyTorch {cfg['torch']}, one thread per process)\n\n"
            f"benchmarks/decks/compute_bound.toml with {' '.join(cfg['overrides'])}: B = {cfg['global_batch']}, "
            f"b = {cfg['microbatch_size']}, m = {cfg['m']}. Sequential: one process; 1F1B: 2 processes "
            "(kpipe: MPI ranks; PyTorch: gloo), stages split [" + ", ".join(str(x) for x in load(
                os.path.join(d, os.path.basename(rounds[0]).replace("sequential", "1f1b")))["partition"])
            + "] layers. Targets (issue 12): kpipe / PyTorch >= 1.5 sequential, >= 2 for 1F1B p = 2.\n\n"
            + table(["round", "kpipe seq samples/s", "PyTorch seq", "ratio", "kpipe 1F1B p=2", "PyTorch 1F1B p=2",
                     "ratio", "kpipe seq step ms = Linear (GEMM + bias) + synthetic data + rest", "PyTorch seq step ms"], rows))
    text += (f"\nMedian over rounds: sequential {statistics.median(seq_ratios):.2f}x, "
             f"1F1B p = 2 {statistics.median(pipe_ratios):.2f}x.\n")
    return text


def peer_transformer(d):
    path = os.path.join(d, "peer-transformer.jsonl")
    if not os.path.exists(path):
        return ""
    records = [json.loads(line) for line in open(path) if line.strip()]
    if len(records) == 1 and "skipped" in records[0]:
        return f"## Peer comparison: transformer\n\nSkipped: {records[0]['skipped']}\n"
    groups = {}
    for r in records:
        key = "PyTorch (b = 32, one batch)" if r["peer"] == "pytorch" else f"kpipe sequential, b = {r['microbatch_size']}"
        groups.setdefault(key, []).append(r["tokens_per_second"])
    torch_rate = statistics.median(groups.get("PyTorch (b = 32, one batch)", [float("nan")]))
    rows = [[k, len(v), fmt(statistics.median(v), 0), fmt(statistics.median(v) / torch_rate)] for k, v in groups.items()]
    return ("## Peer comparison: transformer (benchmarks/peers/compare_transformer.sh)\n\n"
            + table(["run", "rounds", "median tokens/s", "vs PyTorch"], rows))


def main():
    d = sys.argv[1]
    env_path = os.path.join(d, "environment.json")
    parts = ["# kpipe benchmark summary\n"]
    if os.path.exists(env_path):
        e = load(env_path)
        parts.append(f"Commit {e['commit']}{' (uncommitted changes)' if e['dirty'] else ''}, {e['cpu']}, "
                     f"{e['cores']} cores, load average at start {', '.join(f'{x:.2f}' for x in e['load_average_at_start'])}"
                     f"{', quick mode' if e['quick'] else ''}.\n")
    for part in (kernels, pipeline, action_overhead, memory, gradient_sums, tensor_parallel, sweep, transformer, peer_mlp, peer_transformer):
        try:
            text = part(d)
        except FileNotFoundError:
            continue
        if text:
            parts.append(text)
    print("\n".join(parts), end="")


if __name__ == "__main__":
    main()
