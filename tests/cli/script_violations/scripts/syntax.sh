#!/usr/bin/env bash
# Planted failure for cli_scripts_catch_violations: bash -n rejects it (no fi).
if [ -n "${1:-}" ]; then
  echo "given $1"
