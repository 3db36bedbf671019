#!/usr/bin/env bash
# Runs a command under an address-space limit, as `ulimit -v` in a job script:
#   tests/cli/with_ulimit_v.sh KIB COMMAND [ARGS...]
set -euo pipefail
ulimit -v "$1"
shift
exec "$@"
