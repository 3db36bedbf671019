#!/usr/bin/env bash
# A run inside a cgroup whose memory limit is below what the model needs is
# refused before it allocates, naming the cgroup's limit: the check reads the
# limit Slurm's cgroup plugin would set (v1's memory.limit_in_bytes or v2's
# memory.max). The test makes a child cgroup of its own with a 1 GiB limit
# and exits 77 (skipped) where it cannot (no writable memory controller).
#   cgroup_memory_limit.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup | head -n 1)
if [ -n "$line" ]; then
  parent=/sys/fs/cgroup/memory${line##*:}
  limit_file=memory.limit_in_bytes
else
  parent=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  limit_file=memory.max
  # v2 sets limits only on children whose parent delegates the controller.
  grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null || parent=
fi
group=${parent:+$parent/kpipe-test-$$}
if [ -z "$group" ] || ! mkdir "$group" 2>/dev/null; then
  echo "skipped: no writable cgroup memory controller here"
  exit 77
fi
trap 'rmdir "$group" 2>/dev/null' EXIT
echo $((1 << 30)) >"$group/$limit_file"

# The run's shell joins the group; kpipe inherits it.
output=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$group" \
  timeout 60 "$kpipe" run inputs/quickstart.toml pipeline.stages=1 "model.hidden=[8192,8192,8192]" train.steps=1 \
  2>&1 >/dev/null)
code=$?
if [ "$code" -ne 2 ] || [ "$(printf '%s\n' "$output" | wc -l)" -ne 1 ] ||
  ! grep -q "are available to it (the cgroup's memory limit of 1024 MiB" <<<"$output"; then
  echo "exit code $code (want 2), output: $output"
  exit 1
fi
echo "refused under the cgroup's $limit_file: ${output#kpipe: error: }"
