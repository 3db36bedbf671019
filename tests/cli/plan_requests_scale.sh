#!/usr/bin/env bash
# `kpipe plan DECK requests=FILE` on traces of 256,000 and 10^6 one-token
# requests (a millisecond apart): each plan must finish within 30 s and
# simulate every request under both batching policies. The serving plan once
# grew super-linearly (over 120 s at 256,000).
#   plan_requests_scale.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for count in 256000 1000000; do
  awk -v n="$count" 'BEGIN { for (i = 0; i < n; i++) printf("{\"arrival\": %.3f, \"prompt_tokens\": [1], \"max_new_tokens\": 1}\n", i * 0.001) }' \
    >"$work/requests.jsonl"
  start=$(date +%s)
  timeout 60 "$kpipe" plan inputs/kjv-serve.toml data.source=synthetic requests="$work/requests.jsonl" >"$work/plan.log" 2>&1 ||
    { echo "the plan of $count requests failed"; tail -n 5 "$work/plan.log"; exit 1; }
  seconds=$(($(date +%s) - start))
  [ "$seconds" -le 30 ] || { echo "the plan of $count requests took $seconds s"; exit 1; }
  for policy in request uniform; do
    grep -Eq "^[* ] $policy +$count " "$work/plan.log" || { echo "no $policy row of $count requests"; exit 1; }
  done
  echo "$count requests: $seconds s"
done
echo "plans of 256000 and 1000000 requests in at most 30 s each"
