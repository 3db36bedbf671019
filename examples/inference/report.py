#!/usr/bin/python3
"""Markdown table of compare_policies.sh's runs: per (p, policy), the median
over rounds of each figure `kpipe serve --json` reports."""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

FIGURES = [
    ("tokens/s", lambda r: r["tokens_per_second"]),
    ("tokens/s simulated", lambda r: r["simulated_tokens_per_second"]),
    ("bubble", lambda r: r["bubble"]["measured"]),
    ("bubble simulated", lambda r: r["bubble"]["simulated"]),
    ("microbatches", lambda r: r["microbatches"]),
    ("TTFT p50 ms", lambda r: 1e3 * r["time_to_first_token"]["p50"]),
    ("TTFT p99 ms", lambda r: 1e3 * r["time_to_first_token"]["p99"]),
    ("TBT p50 ms", lambda r: 1e3 * r["time_between_tokens"]["p50"]),
    ("TBT p99 ms", lambda r: 1e3 * r["time_between_tokens"]["p99"]),
]


def cell(value):
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main(directory):
    runs = defaultdict(list)
    for path in sorted(Path(directory).glob("p*-*.json")):
        run = json.loads(path.read_text())
        runs[(run["ranks"], run["batching"])].append(run)
    if not runs:
        sys.exit(f"report.py: no p*-*.json runs in {directory}")
    print("| p | batching | rounds | " + " | ".join(name for name, _ in FIGURES) + " |")
    print("|---|---|---:|" + "---:|" * len(FIGURES))
    for (p, policy), group in sorted(runs.items()):
        cells = [cell(statistics.median(figure(r) for r in group)) for _, figure in FIGURES]
        print(f"| {p} | {policy} | {len(group)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "serving-results")
