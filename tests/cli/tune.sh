#!/usr/bin/env bash
# kpipe tune on the compute-bound deck (2 ranks): every candidate it predicts
# is a shape the deck's ranks can run, partitioned into p·v stages that cover
# the model's layers, ranked by predicted step; the best --top were measured;
# the winner is the fastest measured (or the deck as written) and its keys
# are printed; and under a memory limit the deck exceeds (below). An
# inference deck, and --costs of another shape or missing, are refused in one
# line, exit code 2.
#   tune.sh MPIEXEC KPIPE (from the repository root)
set -uo pipefail
shopt -s extglob
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deck=benchmarks/decks/compute_bound.toml
"$mpiexec" -n 2 "$kpipe" tune "$deck" --steps 2 --top 2 --json "$work/tune.json" >"$work/tune.log" 2>&1 ||
  { echo "kpipe tune failed"; tail -n 5 "$work/tune.log"; exit 1; }
grep -E "^winner" "$work/tune.log" || { echo "no winner line"; exit 1; }
/usr/bin/python3 - "$work/tune.json" <<'EOF' || exit 1
import json, sys
tune = json.load(open(sys.argv[1]))
rows = tune["candidates"]
layers, p, per_replica, deck_b = 9, 2, 512, 32  # the deck: 9 Linear layers, 2 stages, B = 512
measured = [r for r in rows if "measured_step_seconds" in r]
checks = {
    "candidates from several schedules": len({r["schedule"] for r in rows}) >= 5,
    "ranked by predicted step": all(a["predicted_step_seconds"] <= b["predicted_step_seconds"]
                                    for a, b in zip(rows, rows[1:])),
    "the two best measured, no other": measured == rows[:2],
    "every partition: p·v stages covering the layers": all(
        len(r["partition"]) == p * r["v"] and sum(r["partition"]) == layers and min(r["partition"]) >= 1
        for r in rows),
    "every b divides B and lies in the calibrated sizes": all(
        per_replica % r["b"] == 0 and deck_b / 4 <= r["b"] <= 4 * deck_b for r in rows),
    "dualpipe-v only with m >= 2p": all(per_replica // r["b"] >= 2 * p for r in rows
                                        if r["schedule"] == "dualpipe-v"),
    "v = 2 for the V schedules": all(r["v"] == 2 for r in rows if r["schedule"] in ("zb-v", "dualpipe-v")),
    "recomputation on and off": {r["recompute"] for r in rows} == {"none", "full"},
    "a memory estimate per rank, within the limit": all(
        len(r["peak_mib_per_rank"]) == p and 0 < max(r["peak_mib_per_rank"]) <= tune["memory_limit_mib"]
        for r in rows),
    "the winner is the fastest measured, or the deck": (
        tune["winner"] == "deck" and tune["deck_measured_step_seconds"] <= min(r["measured_step_seconds"] for r in measured)
    ) or (tune["winner"] != "deck" and tune["winner"]["measured_step_seconds"] == min(r["measured_step_seconds"] for r in measured)
          and tune["winner"]["measured_step_seconds"] < tune["deck_measured_step_seconds"]),
}
failed = [name for name, ok in checks.items() if not ok]
print("\n".join(f"{'ok' if ok else 'FAILED'}: {name}" for name, ok in checks.items()))
sys.exit(1 if failed else 0)
EOF
# Under a memory limit the deck as written exceeds (kjv-char at T = 256, 1F1B
# without recomputation): the sizes that do not fit are left out of the
# calibration, every candidate's estimate fits, and the winner's measured peak
# stays under the limit on every rank while its step beats the deck with full
# recomputation, measured in the same run.
"$mpiexec" -n 2 "$kpipe" tune inputs/kjv-char.toml data.source=synthetic model.context=256 \
  runtime.memory_limit_mib=170 --steps 2 --top 2 --json "$work/capped.json" >"$work/capped.log" 2>&1 ||
  { echo "kpipe tune under a limit failed"; tail -n 5 "$work/capped.log"; exit 1; }
/usr/bin/python3 - "$work/capped.json" <<'EOF' || exit 1
import json, sys
tune = json.load(open(sys.argv[1]))
rows, limit, winner = tune["candidates"], tune["memory_limit_mib"], tune["winner"]
checks = {
    "the limit is the deck's": limit == 170,
    "the deck as written does not fit, so is not measured": tune["deck_measured_step_seconds"] == 0,
    "every candidate's estimate fits": all(max(r["peak_mib_per_rank"]) <= limit for r in rows),
    "none, selective and full recomputation searched": {r["recompute"] for r in rows} == {"none", "selective", "full"},
    "the winner's measured peak within the limit": winner != "deck" and 0 < winner["measured_peak_mib"] <= limit,
    "the winner beats full recomputation, measured beside it": 0 < winner["measured_step_seconds"]
        < tune["full_recompute_measured_step_seconds"],
}
print("\n".join(f"{'ok' if ok else 'FAILED'}: {name}" for name, ok in checks.items()))
sys.exit(0 if all(checks.values()) else 1)
EOF
out=$("$kpipe" tune inputs/forward.toml 2>&1)
code=$?
[[ $code -eq 2 && $out == *"kpipe tune measures training steps"* ]] ||
  { echo "an inference deck: exit $code, '$out'"; exit 1; }
# Costs of another shape, and none at all: rank 0 finds out, every rank ends with its line.
for costs in tests/data/costs/p2.json "$work/missing.json"; do
  out=$(timeout 60 "$mpiexec" -n 2 "$kpipe" tune inputs/quickstart.toml pipeline.schedule=interleaved \
    pipeline.virtual_stages=2 --costs "$costs" --steps 1 2>&1)
  code=$?
  [[ $code -eq 2 && $out == *"kpipe: error: rank 0: "*@(measured on 2 model stages but the deck has 4|cannot open --costs)* ]] ||
    { echo "--costs $costs: exit $code, '$(grep error <<<"$out")'"; exit 1; }
done
echo "kpipe tune: candidates, measurements and winner as expected"
