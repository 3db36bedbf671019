#!/usr/bin/env bash
# Starts a long 2-rank training run, kills one rank with SIGKILL once training
# is under way, and checks that the job then ends (non-zero) within 60 s.
set -uo pipefail
mpiexec=$1 kpipe=$2
log=$(mktemp)
"$mpiexec" -n 2 "$kpipe" run inputs/quickstart.toml train.steps=100000 runtime.watchdog_seconds=30 >"$log" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "^step" "$log" && break; sleep 0.2; done
victim=$(pgrep -f "$kpipe run inputs/quickstart.toml" | grep -v "^$job\$" | tail -n 1)
[ -n "$victim" ] || { echo "no rank to kill"; cat "$log"; exit 1; }
kill -9 "$victim"
for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then
  echo "the job still runs 60 s after a rank died"; kill -9 "$job"; exit 1
fi
wait "$job"; code=$?
tail -n 5 "$log"
rm -f "$log"
[ "$code" -ne 0 ] || { echo "the job exited 0 although a rank died"; exit 1; }
echo "job ended with exit code $code after a rank died"
