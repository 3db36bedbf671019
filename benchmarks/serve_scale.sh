#!/usr/bin/env bash
# kpipe serve's time per request as requests pile up: traces of N one-token
# requests that all arrive within one second, served by `kpipe serve DECK` on
# 2 ranks (p = 2). One JSON object per trace on stdout (requests, the serving
# seconds and seconds per request from kpipe's --json), then the ratio of the
# largest trace's time per request to the smallest's: flat serving keeps it
# near or below 1 (docs/performance.md, "Serving at scale").
#
#   benchmarks/serve_scale.sh [DECK] [N...]     default: tests/data/lm/genesis.toml 10000 100000
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deck=${1:-$root/tests/data/lm/genesis.toml}
shift || true
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(10000 100000)
kpipe=${KPIPE_BUILD:-$root/build}/src/app/kpipe
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

per_request=()
for count in "${counts[@]}"; do
  awk -v n="$count" \
    'BEGIN { for (i = 0; i < n; i++) printf("{\"arrival\": %.7f, \"prompt_tokens\": [1], \"max_new_tokens\": 1}\n", i / n) }' \
    >"$work/requests.jsonl"
  mpirun -n 2 "$kpipe" serve "$deck" requests="$work/requests.jsonl" --json "$work/serve.json" >/dev/null
  line=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
n = len(d["requests"])
print(json.dumps({"requests": n, "seconds": d["seconds"], "seconds_per_request": d["seconds"] / n}))' \
    "$work/serve.json")
  echo "$line"
  per_request+=("$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["seconds_per_request"])' "$line")")
done
python3 -c 'import json, sys
first, last = float(sys.argv[1]), float(sys.argv[2])
print(json.dumps({"largest_over_smallest_seconds_per_request": last / first}))' "${per_request[0]}" "${per_request[-1]}"
