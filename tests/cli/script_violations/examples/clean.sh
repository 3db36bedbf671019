#!/usr/bin/env bash
# A clean script beside the planted failures: it must not be named.
set -euo pipefail
echo "clean: ${1:-nothing given}"
