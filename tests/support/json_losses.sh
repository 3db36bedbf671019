# shellcheck shell=bash
# Sourced by the test scripts that compare runs: losses FILE prints the
# "losses" array of a kpipe --json report as one line, every value in the
# report's full precision, so two runs compare bitwise as text.
losses() { sed -n '/"losses"/,/\]/p' "$1" | tr -d ' \n' | sed 's/"losses":\[//; s/\].*//'; }
