#!/usr/bin/env bash
# The KPIPE of the preemption test: `kpipe run` writes its --json report to
# KPIPE_JSON_DIR/start-N.json, N the job's start (SLURM_RESTART_COUNT), so the
# preempted start's losses and the resumed start's are both kept.
set -euo pipefail
if [ "${1:-}" = run ]; then
  exec "$KPIPE_REAL" "$@" --json "$KPIPE_JSON_DIR/start-${SLURM_RESTART_COUNT:-0}.json"
fi
exec "$KPIPE_REAL" "$@"
