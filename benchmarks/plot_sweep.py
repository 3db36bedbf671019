#!/usr/bin/python3
"""Throughput against microbatch size b from `kpipe sweep --json` files, one
panel each: measured samples/s (points) and what the simulator predicts from
the fitted per-action costs (line), the measured best ringed.

  /usr/bin/python3 benchmarks/plot_sweep.py OUT.png SWEEP.json [SWEEP.json ...]

Also writes OUT with the .svg suffix.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    out, paths = sys.argv[1], sys.argv[2:]
    fig, axes = plt.subplots(1, len(paths), figsize=(5 * len(paths), 4), squeeze=False)
    for ax, path in zip(axes[0], paths):
        with open(path) as file:
            sweep = json.load(file)
        rows = sweep["rows"]
        b = [r["b"] for r in rows]
        measured = [r["measured_samples_per_second"] for r in rows]
        predicted = [r["predicted_samples_per_second"] for r in rows]
        ax.plot(b, predicted, "-", label="predicted (fitted costs)")
        ax.plot(b, measured, "o", label="measured")
        best = max(range(len(rows)), key=lambda i: measured[i])
        ax.plot([b[best]], [measured[best]], "o", markersize=13, fillstyle="none", color="C1", label="measured best")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("microbatch size b (samples)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"{os.path.basename(sweep['deck'])}: {sweep['schedule']}, p = {sweep['p']}, "
                     f"B = {sweep['global_batch']}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    fig.savefig(os.path.splitext(out)[0] + ".svg")


if __name__ == "__main__":
    main()
