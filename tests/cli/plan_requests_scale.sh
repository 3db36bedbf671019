#!/usr/bin/env bash
# `kpipe plan DECK requests=FILE` at scale: traces of 256,000 and 10^6
# one-token requests a millisecond apart, and 10^6 that all arrive within one
# second (they pile up in the queue). Each plan must simulate every request
# under both batching policies within 60 s and 2 GiB (bounded_run). The
# serving plan once grew super-linearly: over 120 s at 256,000 spread
# requests, and at 10^6 piled-up ones (each arrival searched the queue).
#   plan_requests_scale.sh KPIPE BOUNDED_RUN (from the repository root)
set -uo pipefail
kpipe=$1 bounded_run=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for trace in "256000 0.001" "1000000 0.001" "1000000 0.000001"; do
  read -r count apart <<<"$trace"
  awk -v n="$count" -v apart="$apart" \
    'BEGIN { for (i = 0; i < n; i++) printf("{\"arrival\": %.6f, \"prompt_tokens\": [1], \"max_new_tokens\": 1}\n", i * apart) }' \
    >"$work/requests.jsonl"
  start=$(date +%s)
  "$bounded_run" 2048 60 "$kpipe" plan inputs/kjv-serve.toml data.source=synthetic requests="$work/requests.jsonl" \
    >"$work/plan.log" 2>&1 || { echo "the plan of $count requests $apart s apart failed"; tail -n 5 "$work/plan.log"; exit 1; }
  seconds=$(($(date +%s) - start))
  grep -q "^serve plan: $count requests" "$work/plan.log" || { echo "the plan does not read $count requests"; exit 1; }
  for policy in request uniform; do
    grep -Eq "^[* ] $policy +[0-9]+ " "$work/plan.log" || { echo "no $policy row of $count requests"; exit 1; }
  done
  echo "$count requests $apart s apart: $seconds s"
done
echo "plans of 256000 and 1000000 requests, spread and piled up, each within 60 s and 2 GiB"
