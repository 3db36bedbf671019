#!/usr/bin/env bash
# The bubble within each rank's span (first compute to last), next to the
# makespan bubble: `kpipe plan --json` of the ZB-V deck at F = B = W has none
# (the schedule's claim), 1F1B's is half its makespan bubble; `kpipe run
# --json` reports it measured and simulated, the measured one never above the
# makespan's (a span lies inside the makespan); and the steps disturbed from
# outside the run, those over twice the median steady step, recomputed here
# from the step times, with the bubble without them (the measured one where
# there are none).
#   span_bubble.sh MPIEXEC KPIPE (from the repository root)
set -uo pipefail
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$kpipe" plan inputs/zb-v.toml --json "$work/zb-v.json" >/dev/null 2>&1 || { echo "plan zb-v failed"; exit 1; }
"$kpipe" plan inputs/quickstart.toml --json "$work/1f1b.json" >/dev/null 2>&1 || { echo "plan 1f1b failed"; exit 1; }
"$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml --json "$work/run.json" >"$work/run.log" 2>&1 ||
  { echo "the run failed"; tail -n 5 "$work/run.log"; exit 1; }
grep "^bubble within each rank's span (first compute to last): measured" "$work/run.log" ||
  { echo "the run prints no span bubble"; exit 1; }
/usr/bin/python3 - "$work" <<'EOF' || exit 1
import json, statistics, sys
work = sys.argv[1]
zb_v = json.load(open(f"{work}/zb-v.json"))["bubble"]
one_f_one_b = json.load(open(f"{work}/1f1b.json"))["bubble"]
summary = json.load(open(f"{work}/run.json"))
run = summary["bubble"]
steady = summary["step_seconds"][1:]
median = statistics.median(steady)
over = [i + 2 for i, s in enumerate(steady) if s > 2 * median]  # step numbers as the log counts them
checks = {
    "zb-v: no idle within spans": abs(zb_v["simulated_span"]["idle_over_useful"]) < 1e-12,
    "zb-v: a makespan bubble all the same": zb_v["simulated"]["idle_over_useful"] > 0.01,
    "1f1b: within spans half the makespan bubble": abs(2 * one_f_one_b["simulated_span"]["idle_over_useful"]
                                                       - one_f_one_b["simulated"]["idle_over_useful"]) < 1e-12,
    "run: simulated within spans half the makespan's": abs(2 * run["simulated_deck_costs_span"]["idle_over_useful"]
                                                           - run["simulated_deck_costs"]["idle_over_useful"]) < 1e-12,
    "run: measured within spans, 0 to the makespan's": 0 <= run["measured_span"]["idle_over_useful"]
                                                       <= run["measured"]["idle_over_useful"],
    "run: disturbed steps over twice the median steady step": summary["disturbed_steps"] == over,
    "run: without disturbed steps, the measured bubble where none": bool(over) or
        run["measured_undisturbed"] == run["measured"],
}
for name, ok in checks.items():
    print(("ok    " if ok else "FAIL  ") + name)
sys.exit(0 if all(checks.values()) else 1)
EOF
echo "span bubbles: planned and measured as expected"
