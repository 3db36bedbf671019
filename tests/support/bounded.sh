# shellcheck shell=bash
# Sourced by the fault tests: bounded SECONDS COMMAND... runs COMMAND (an
# mpiexec) like timeout(1), but a launcher still running after SECONDS is
# not merely signalled (Open MPI's mpirun ignores a SIGTERM while it is
# already aborting a job): the launcher's and its ranks' states go to
# stderr, as evidence of where the hang was, then all of them are killed,
# stopped ranks included, and it returns 124.
bounded() {
  local seconds=$1
  shift
  "$@" &
  local launcher=$! tenths=0
  while kill -0 "$launcher" 2>/dev/null; do
    if [ "$tenths" -ge $((seconds * 10)) ]; then
      echo "bounded: still running after $seconds s: $*" >&2
      ps -o pid,ppid,stat,wchan:28,etime,args -p "$launcher" --ppid "$launcher" >&2
      # shellcheck disable=SC2046 # one pid per word
      kill -KILL $(pgrep -P "$launcher") "$launcher" 2>/dev/null
      wait "$launcher"
      return 124
    fi
    sleep 0.1
    tenths=$((tenths + 1))
  done
  wait "$launcher"
}
