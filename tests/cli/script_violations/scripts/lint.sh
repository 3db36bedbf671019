#!/usr/bin/env bash
# Planted failure for cli_scripts_catch_violations: parses, but shellcheck
# rejects the unquoted expansion (SC2086).
set -euo pipefail
target=${1:-/tmp/kpipe-scratch}
ls -d $target
