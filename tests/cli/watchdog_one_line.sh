#!/usr/bin/env bash
# A rank stopped mid-run (SIGSTOP, as a hung node would) holds every other
# rank, and their watchdogs time out together: the job must end within the
# watchdog's time plus 10 s with exactly one "kpipe: error:" line, a watchdog
# line from a rank that was not stopped. Each of 4 pipeline ranks in turn.
# Usage: watchdog_one_line.sh MPIEXEC KPIPE (4 ranks, from the repository root)
set -uo pipefail
mpiexec=$1 kpipe=$2
work=$(mktemp -d)
job=""
trap '[ -n "$job" ] && kill -KILL "$job" 2>/dev/null; rm -rf "$work"' EXIT
watchdog=3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for victim in 0 1 2 3; do
  "$mpiexec" -n 4 "$kpipe" run inputs/quickstart.toml pipeline.stages=4 train.steps=1000000 \
    "runtime.watchdog_seconds=$watchdog" >"$work/out" 2>"$work/err" &
  job=$!
  for _ in $(seq 300); do grep -q "^step  3/" "$work/out" && break; sleep 0.1; done
  stopped=""
  for pid in $(pgrep -P "$job"); do
    tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$victim" && stopped=$pid
  done
  if [ -z "$stopped" ]; then
    fail "rank $victim: no process of that rank"
    kill "$job"
    wait "$job"
    continue
  fi
  start=$(date +%s)
  kill -STOP "$stopped"
  wait "$job"
  code=$?
  seconds=$(($(date +%s) - start))
  lines=$(grep -c "kpipe: error:" "$work/err")
  [ "$code" -ne 0 ] || fail "rank $victim stopped: exit code 0"
  ((seconds <= watchdog + 10)) || fail "rank $victim stopped: the job took $seconds s"
  [ "$lines" -eq 1 ] || fail "rank $victim stopped: $lines error lines: $(grep "kpipe: error:" "$work/err")"
  grep "kpipe: error: watchdog: rank" "$work/err" | grep -vq "rank $victim waited" ||
    fail "rank $victim stopped: no watchdog line from another rank: $(cat "$work/err")"
  echo "rank $victim stopped: exit $code after $seconds s: $(grep "kpipe: error:" "$work/err" | cut -c1-110)"
done
job=""
echo "$failures failures"
[ "$failures" -eq 0 ]
