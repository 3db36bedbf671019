# shellcheck shell=bash
# Sourced by the fault tests: stopped_among SECONDS COMMAND... prints the
# first pid that COMMAND lists (run again every 0.05 s) whose process is
# stopped (state T, as KPIPE_FAULT's stall phases leave a rank); returns 1
# when none has stopped within SECONDS.
stopped_among() {
  local seconds=$1 pid tries
  shift
  for ((tries = 0; tries < seconds * 20; ++tries)); do
    for pid in $("$@"); do
      if [ "$(ps -o state= -p "$pid" | tr -d ' ')" = T ]; then
        echo "$pid"
        return 0
      fi
    done
    sleep 0.05
  done
  return 1
}
