#!/usr/bin/env bash
# Every rank in turn fails in every phase PHASES names (KPIPE_FAULT,
# test-only; include/kpipe/core/fault.hpp lists them: set-up's, a restart's
# read, kpipe serve's set-up, a step, a checkpoint write): the job must end
# within 10 s with exit code 1 and exactly one "kpipe: error:" line naming
# that rank, and leave no kpipe process or shared-memory segment behind.
# `kpipe run` trains three steps with a checkpoint each; the "restart" phase
# restarts from the checkpoint a clean run wrote first.
# Usage: fault_injection.sh MPIEXEC KPIPE RANKS PHASES COMMAND DECK [KEY=VALUE...]
#   e.g. fault_injection.sh mpiexec kpipe 2 setup,restart run inputs/quickstart.toml pipeline.data_parallel=2
set -uo pipefail
mpiexec=$1 kpipe=$2 ranks=$3 phases=$4 command=$5
shift 5
shm_before=$(find /dev/shm -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=("$@")
[ "$command" = run ] && args+=(train.steps=3 checkpoint.every=1 "checkpoint.path=$work")
if [[ ",$phases," == *,restart,* ]]; then
  "$mpiexec" -n "$ranks" "$kpipe" "$command" "${args[@]}" >"$work/clean.log" 2>&1 ||
    { echo "FAIL: the clean run that writes the restart's checkpoint failed"; cat "$work/clean.log"; exit 1; }
fi
IFS=, read -ra phase_list <<<"$phases"
for phase in "${phase_list[@]}"; do
  extra=()
  [ "$phase" = restart ] && extra=(checkpoint.restart=latest)
  for ((rank = 0; rank < ranks; ++rank)); do
    err=$(mktemp)
    start=$(date +%s%N)
    KPIPE_FAULT="$rank:$phase" timeout 30 "$mpiexec" -n "$ranks" "$kpipe" "$command" "${args[@]}" "${extra[@]}" \
      >/dev/null 2>"$err"
    code=$?
    milliseconds=$((($(date +%s%N) - start) / 1000000))
    lines=$(grep -c "kpipe: error:" "$err")
    case="rank $rank, phase $phase"
    if [ "$code" -eq 0 ] || [ "$code" -eq 124 ]; then fail "$case: exit code $code"; fi
    [ "$lines" -eq 1 ] || fail "$case: $lines kpipe error lines: $(cat "$err")"
    grep -q "kpipe: error: rank $rank: injected fault" "$err" || fail "$case: the error does not name rank $rank: $(cat "$err")"
    ((milliseconds < 10000)) || fail "$case: took $milliseconds ms"
    sleep 0.5  # mpirun reaps its children asynchronously
    pgrep -f "$kpipe $command" >/dev/null && { fail "$case: kpipe processes left"; pkill -9 -f "$kpipe $command"; }
    echo "$case: exit $code in ${milliseconds} ms: $(grep "kpipe: error:" "$err")"
    rm -f "$err"
  done
done

shm_after=$(find /dev/shm -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort)
left=$(comm -13 <(echo "$shm_before") <(echo "$shm_after"))
[ -z "$left" ] || fail "shared-memory segments left behind: $left"
echo "$failures failures"
[ "$failures" -eq 0 ]
