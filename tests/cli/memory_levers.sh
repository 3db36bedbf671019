#!/usr/bin/env bash
# kpipe plan's memory levers: each schedule x recomputation's estimate per
# rank (--json "memory_levers") is what `kpipe plan` prints for that deck run
# as such (the deck's own, and V-Half's, from the same baseline of process
# memory, or rank to rank across two plans); selective keeps less than none and
# full less again where the stash dominates (1F1B, kjv-char's GEMM attention);
# an MLP has no selective column; a cap marks the levers above it.
#   memory_levers.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=(inputs/kjv-char.toml data.source=synthetic)
plan() {
  local name=$1
  shift
  "$kpipe" plan "$@" --json "$work/$name.json" >"$work/$name.log" 2>&1 || {
    echo "plan $name failed: $(tail -1 "$work/$name.log")"
    exit 1
  }
}
plan deck "${deck[@]}"
plan v-half "${deck[@]}" pipeline.schedule=v-half pipeline.virtual_stages=2
plan mlp inputs/quickstart.toml
plan capped "${deck[@]}" runtime.memory_limit_mib=70
/usr/bin/python3 - "$work" <<'PY' || exit 1
import json, re, sys
work = sys.argv[1]
def printed(name):  # "memory, rank r: X MiB" per rank
    return [float(m) for m in re.findall(r"^memory, rank \d+: ([\d.]+) MiB", open(f"{work}/{name}.log").read(), re.M)]
def levers(name):
    return {(l["schedule"], l["v"], l["recompute"]): l["estimated_mib_per_rank"]
            for l in json.load(open(f"{work}/{name}.json"))["memory_levers"]}
deck, mlp = levers("deck"), levers("mlp")
# One baseline (the process's own memory) serves every estimate of a plan;
# the printed ones are rounded to 0.1 MiB. Across two plans the baselines
# differ, so there the ranks' differences from rank 0 are compared.
def agree(lever, plan):
    return len(lever) == len(plan) and all(abs(a - b) <= 0.051 for a, b in zip(lever, plan))
def agree_across(lever, plan):
    return len(lever) == len(plan) and all(abs((a - lever[0]) - (b - plan[0])) <= 0.11 for a, b in zip(lever, plan))
none, selective, full = (deck[("1f1b", 1, r)] for r in ("none", "selective", "full"))
checks = {
    "the deck's own lever is its plan's estimate": agree(none, printed("deck")),
    "v-half's lever is the v-half deck's estimate, rank to rank": agree_across(deck[("v-half", 2, "none")],
                                                                              printed("v-half")),
    "the v-half deck's own lever is its plan's estimate": agree(levers("v-half")[("v-half", 2, "none")],
                                                                printed("v-half")),
    "1f1b rank 0: full < selective < none": full[0] < selective[0] < none[0],
    "every training schedule of the registry": {s for s, _, _ in deck} >=
        {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "v-half", "v-min", "dualpipe-v"},
    "an MLP has no selective recomputation": all(r != "selective" for _, _, r in mlp) and
        any(r == "full" for _, _, r in mlp),
    "a cap marks the levers above it": "over: above runtime.memory_limit_mib = 70" in open(f"{work}/capped.log").read(),
}
for name, ok in checks.items():
    print(("ok    " if ok else "FAIL  ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY
echo "memory levers: as planned deck by deck"
